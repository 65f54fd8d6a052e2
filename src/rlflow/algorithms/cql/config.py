"""`CQLConfig`: conservative Q-learning from recorded experience, on SAC's learner.

SAC's fields (`rlflow.algorithms.sac.SACConfig`) plus CQL's own, with RLlib's names and
defaults (``min_q_weight`` 5, ``num_actions`` 10, ``temperature`` 1, ``bc_iters`` 20,000).
Defaults otherwise SAC's, but: no rollout workers (the env is stepped only by evaluation, every
iteration), the whole recorded set held in replay (``buffer_size`` 1M, training from the first
10,000 rows read), and an iteration of at least 1,000 rows read.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.algorithms.sac.config import SACConfig

__all__ = ["CQLConfig"]


@dataclass(frozen=True, kw_only=True)
class CQLConfig(
    SACConfig,
    defaults={
        "learning_starts": 10_000,
        "min_steps_per_iteration": 1000,
        "evaluation_interval": 1,
    },
):
    """CQL (Kumar et al., "Conservative Q-Learning for Offline Reinforcement Learning",
    NeurIPS 2020), CQL(H) on SAC: each critic's loss adds ``min_q_weight * (log sum_a exp
    Q(s, a) - Q(s, a_data))``, the log-sum-exp over ``num_actions`` uniform actions and as many
    of the policy's at ``s`` and at ``s'`` (importance-weighted by their densities), so Q
    stays low on actions the data does not show.

    ``input`` names recorded n-step transitions (a SAC or TD3 run's, ``output=DIR``); they fill
    the replay buffer, which the learner samples as SAC's does.
    """

    min_q_weight: float = 5.0
    """Weight of the conservative term in each critic's loss, >= 0 (0: plain SAC on the
    recorded data)."""
    num_actions: int = 10
    """Actions sampled per observation and source (uniform, policy at s, policy at s') for the
    log-sum-exp, >= 1."""
    temperature: float = 1.0
    """Temperature of the log-sum-exp, > 0."""
    bc_iters: int = 20_000
    """Learner steps during which the actor imitates the recorded actions (``alpha * log
    pi(a|s) - log pi(a_data|s)``) before it maximizes Q, >= 0 (RLlib's warm start)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_range("min_q_weight", 0.0, float("inf"))
        self._check_int("num_actions", 1)
        self._check_positive("temperature")
        self._check_int("bc_iters", 0)
        if self.observation_filter != "NoFilter":
            raise self._bad(
                "observation_filter",
                "must be 'NoFilter': recorded observations are as the recording run's policy "
                "saw them (filtered, if that run had a filter)",
            )
