"""Self-play settings (`SelfPlay`, a config's ``self_play``) and the per-episode policy mapping
they give (`SelfPlayMapping`).

A config's ``self_play`` is None (off) or a `SelfPlay`; given as a dict (a YAML ``self_play:``
block, ``--set self_play.snapshot_every=10``, ``PPOConfig(self_play={...})``) it is checked
into one (``{}``: off).

With ``self_play`` set, each learning policy ``p`` gets a pool of ``pool_size`` frozen copies,
``p_snapshot_0`` (the newest) to ``p_snapshot_<pool_size - 1>`` (`snapshot_id`): policies of
the run like any other (built from ``p``'s spec, sent to the workers with the weights), that
never train. Every agent of the env is a seat of the game: each episode picks one learning
policy and one seat for it, and fills every other seat with a snapshot of that policy drawn
by ``opponent_sampling``. The plan stage `rlflow.ops.self_play.SnapshotPolicies` copies the
learner into the pool every ``snapshot_every`` iterations and measures win rates.

This module is torch-free: the mapping travels to every worker inside the config.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rlflow.checks import check_choice, check_int
from rlflow.config.group import NestedGroup
from rlflow.errors import ConfigError

__all__ = [
    "OPPONENT_SAMPLING",
    "EpisodeInfo",
    "SelfPlay",
    "SelfPlayMapping",
    "snapshot_id",
]

OPPONENT_SAMPLING = ("uniform", "latest")
"""How an opponent seat draws from its pool: ``"uniform"`` over all ``pool_size`` snapshots,
``"latest"`` always the newest one."""


class EpisodeInfo(NamedTuple):
    """What a two-argument ``policy_mapping_fn(agent_id, episode)`` learns of the episode."""

    episode_id: int
    """The episode's id, unique across the run's workers."""
    agents: tuple[str, ...]
    """The env's ``possible_agents``: the seats of the game, in order."""


def snapshot_id(policy_id: str, slot: int) -> str:
    """The id of slot ``slot`` of ``policy_id``'s snapshot pool (0: the newest snapshot).

    >>> snapshot_id("default_policy", 0)
    'default_policy_snapshot_0'
    """
    return f"{policy_id}_snapshot_{slot}"


@dataclass(frozen=True, kw_only=True)
class SelfPlay(NestedGroup):
    """A run's self-play settings (a config's ``self_play``; the module docstring)."""

    snapshot_every: int
    """Copy each learning policy into its pool every this many training iterations (>= 1;
    required)."""
    pool_size: int = 5
    """Snapshots kept per learning policy (>= 1). At the start every slot holds the initial
    policy; each snapshot shifts the pool by one, the oldest falls out."""
    opponent_sampling: str = "uniform"
    """Which snapshot takes an opponent seat, drawn per episode and seat: one of
    `OPPONENT_SAMPLING`."""
    policies: tuple[str, ...] = ()
    """The learning policies (each with its own pool; a list is taken). Empty: the run's
    trained policies."""
    evaluation_interval: int | None = None
    """Measure the win rates every this many iterations (>= 0; 0: never; None: at each
    snapshot, just before it)."""
    evaluation_games: int = 100
    """Games per measurement and per opponent (>= 1), the learner's seat taking turns."""

    def __post_init__(self, where: str | None) -> None:
        super().__post_init__()
        label = where or type(self).__name__
        checked = {
            "snapshot_every": check_int(self.snapshot_every, f"{label}.snapshot_every", low=1),
            "pool_size": check_int(self.pool_size, f"{label}.pool_size", low=1),
            "opponent_sampling": check_choice(
                self.opponent_sampling, f"{label}.opponent_sampling", OPPONENT_SAMPLING
            ),
            "evaluation_games": check_int(
                self.evaluation_games, f"{label}.evaluation_games", low=1
            ),
        }
        if self.evaluation_interval is not None:
            checked["evaluation_interval"] = check_int(
                self.evaluation_interval, f"{label}.evaluation_interval", low=0
            )
        policies = self.policies or ()
        if isinstance(policies, str) or not all(isinstance(p, str) for p in policies):
            raise ConfigError(f"{label}.policies={policies!r} must be a list of policy ids")
        checked["policies"] = tuple(policies)
        for name, value in checked.items():  # the checks' conversions (numpy ints, lists)
            object.__setattr__(self, name, value)

    def learners(self, trained: Sequence[str]) -> tuple[str, ...]:
        """The learning policies: `policies`, or ``trained`` (the run's trained policies)."""
        return self.policies or tuple(trained)

    def snapshot_ids(self, learner: str) -> list[str]:
        """The ids of ``learner``'s pool, newest first."""
        return [snapshot_id(learner, k) for k in range(self.pool_size)]

    def evaluates_at(self, iteration: int) -> bool:
        """Whether the win rates are measured after iteration ``iteration`` (1-based)."""
        interval = self.evaluation_interval
        if interval is None:
            interval = self.snapshot_every
        return interval > 0 and iteration % interval == 0


class SelfPlayMapping:
    """``policy_mapping_fn(agent_id, episode)`` of a self-play run (module docstring).

    Per episode (its id and the run's seed seed the draws, so every agent of an episode gets
    the same answer on any worker): a learning policy uniformly, a seat for it uniformly, and
    for each other seat a slot of that policy's pool by ``opponent_sampling``. Without an
    episode (asking which policy an agent's spaces are for) it answers ``base(agent_id)``, or
    the first learner without ``base``.
    """

    def __init__(
        self,
        learners: Sequence[str],
        settings: SelfPlay,
        seed: int = 0,
        base: Callable[[str], str] | None = None,
    ) -> None:
        """Map to ``learners`` and their pools by ``settings``; ``base``: the user's mapping."""
        self.learners = tuple(learners)
        self.settings = settings
        self.seed = seed
        self.base = base

    def __call__(self, agent_id: str, episode: EpisodeInfo | None = None) -> str:
        if episode is None:
            return self.base(agent_id) if self.base is not None else self.learners[0]
        if agent_id not in episode.agents:
            raise ConfigError(
                f"self-play: agent {agent_id!r} is not one of the env's possible_agents "
                f"{list(episode.agents)}; every agent of a self-play game must be a seat"
            )
        rng = random.Random(f"{self.seed}:{episode.episode_id}")
        learner = self.learners[rng.randrange(len(self.learners))]
        seats = len(episode.agents)
        learner_seat = rng.randrange(seats)
        seat = episode.agents.index(agent_id)
        if seat == learner_seat:
            return learner
        uniform = self.settings.opponent_sampling == "uniform"
        slots = [rng.randrange(self.settings.pool_size) if uniform else 0 for _ in range(seats)]
        return snapshot_id(learner, slots[seat])
