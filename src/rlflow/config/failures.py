"""`FailureConfig`: the field group of how a run meets failures (every algorithm config has it).

One of the groups `rlflow.config.AlgorithmConfig` is built from, so the failure model reads in
one place; RLlib's names where they exist. DESIGN.md "Failures are normal" says what each
failure does to a run.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.checks import check_bool, check_int, check_number
from rlflow.config.group import FieldGroup
from rlflow.errors import ConfigError

__all__ = ["ON_NONFINITE", "FailureConfig"]

ON_NONFINITE = ("raise", "skip")
"""The values of ``on_nonfinite``: what a sampler does with a NaN or infinite reward or
observation."""


@dataclass(frozen=True, kw_only=True)
class FailureConfig(FieldGroup):
    """Worker recreation, env restarts, stragglers and what a checkpoint holds."""

    recreate_failed_workers: bool = True
    """Recreate a rollout worker that died (same index and config, the learner's weights and
    global vars pushed before it samples) and go on; False: its death ends the run with a
    `WorkerError` naming it."""
    max_worker_restarts: int = 100
    """Worker recreations allowed over the whole run, >= 0; one more death is an error."""
    restart_failed_sub_environments: bool = False
    """An env that raises in ``reset``/``step`` is closed and rebuilt in place, its partial
    episode dropped (not reported), and the worker keeps sampling; False: the error ends the
    sample call."""
    sample_timeout_s: float | None = None
    """Seconds (> 0) a bulk-sync sampling round waits for the rollout workers: at the deadline
    it takes the batches that arrived (at least one); a late worker's batch is neither dropped
    nor asked for again, it joins the first later round it is ready for (its steps counted
    then, once; it was sampled with older weights). Counter ``num_late_samples``. None: every
    round waits for every worker (deterministic)."""
    on_nonfinite: str = "raise"
    """What a sampler does when an env returns a NaN or infinite reward or observation (checked
    as each arrives, before any observation filter sees it): ``"raise"``: a
    `rlflow.errors.NonFiniteError` naming the env, the worker, the sub-env, the step of the
    episode and the field; ``"skip"``: the episode is dropped (its rows in the fragment being
    sampled, its statistics; the env is reset) and counted in results as
    ``num_nonfinite_episodes``. ``"skip"`` needs ``vector_env`` ``"rlflow"`` (or ``"auto"``)."""
    max_nonfinite_updates: int = 10
    """A learner update whose loss or gradient norm is NaN or infinite is skipped (the weights
    and optimizer state stay as they were) and counted in results as ``num_nonfinite_updates``;
    this many skipped updates in a row, >= 1, stop the run with a
    `rlflow.errors.NonFiniteError` naming the policy, the loss terms that were not finite and
    their last finite values."""
    checkpoint_replay_buffers: bool = False
    """Put replay buffers (DQN's and ppo_dqn's, Ape-X shards, IMPALA's and APPO's mix-in
    replay, DreamerV3's episodes) in checkpoints, so a restored run replays what it stored;
    False: a restored run starts with empty buffers."""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__
        check_bool(self.recreate_failed_workers, f"{name}.recreate_failed_workers")
        check_int(self.max_worker_restarts, f"{name}.max_worker_restarts", low=0)
        check_bool(self.restart_failed_sub_environments, f"{name}.restart_failed_sub_environments")
        if self.sample_timeout_s is not None:
            check_number(self.sample_timeout_s, f"{name}.sample_timeout_s", low=0, low_open=True)
        if self.on_nonfinite not in ON_NONFINITE:
            raise ConfigError(
                f"{name}.on_nonfinite={self.on_nonfinite!r}: must be one of "
                f"{', '.join(repr(v) for v in ON_NONFINITE)}"
            )
        check_int(self.max_nonfinite_updates, f"{name}.max_nonfinite_updates", low=1)
        check_bool(self.checkpoint_replay_buffers, f"{name}.checkpoint_replay_buffers")
