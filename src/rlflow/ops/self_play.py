"""Self-play as a plan stage: `SnapshotPolicies` keeps each learning policy's pool of frozen
snapshots and measures how the learner plays.

A run with ``self_play`` (`rlflow.config.self_play`) has, beside each learning policy ``p``,
``pool_size`` frozen policies ``p_snapshot_<k>`` that the workers' per-episode mapping puts in
the other seats of every game. This stage, the last of the plan (after the result is built,
see `rlflow.ops.metrics.standard_metrics_reporting`), runs once per iteration:

1. every ``evaluation_interval`` iterations it plays ``evaluation_games`` games of each
   learner against a uniformly random legal player (`RandomLegalPolicy`; the learner greedy)
   and against its newest snapshot (both sampling), on a fresh env of the learner's worker,
   the learner's seat taking turns, and reports win / draw / loss rates, overall and by seat
   (`measure_learner`, which also measures a trained policy on its own); every iteration it
   reports each learner's rates in its training games against its pool (``vs_pool``, over the
   results' smoothing window) and the latest measurement's rates against the random player,
   which lead the run's results (`headline_rates`: ``win_rate``, ``draw_rate``,
   ``loss_rate``; a zero-sum game's mean return says nothing);
2. every ``snapshot_every`` iterations it shifts each pool by one on the learner (the oldest
   snapshot falls out, slot 0 gets the learner's weights) and sends the pool's weights to the
   remote workers like any weight sync; the learner's training is not touched.

At the start every slot holds the learner's initial weights. Snapshots never train: they are
left out of ``policies_to_train`` (`rlflow.config.AlgorithmConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from rlflow import flow
from rlflow.config import AlgorithmConfig
from rlflow.config.self_play import EpisodeInfo, SelfPlay
from rlflow.data.sample_batch import ACTION_DIST_INPUTS, LOGP, VF_PREDS
from rlflow.envs.vector import EpisodeStat
from rlflow.errors import ConfigError
from rlflow.models.memory import NoMemory
from rlflow.ops import keys
from rlflow.workers import RolloutWorker, WorkerSet

__all__ = [
    "RANDOM_PLAYER",
    "RandomLegalPolicy",
    "SnapshotPolicies",
    "game_outcomes",
    "headline_rates",
    "measure_learner",
]

RANDOM_PLAYER = "random_legal_player"
"""The policy id the random legal player acts under in self-play evaluation games."""

_EVAL_SEED_OFFSET = 2_000_003
"""Evaluation games of iteration ``i`` reset their env with ``seed + offset + i``: never a
training env's seed, and new games each time."""


class RandomLegalPolicy:
    """A player that picks uniformly among the legal actions of each observation (all actions
    when its space carries no action mask, `rlflow.envs.flatten.ActionMaskBox`): the baseline
    self-play is measured against. It acts in a sampler as a policy does (``compute_actions``);
    it has no weights, no critic and no memory.

    >>> from rlflow.envs.flatten import ActionMaskBox
    >>> space = ActionMaskBox(np.zeros(5), np.ones(5), action_mask_size=3)
    >>> player = RandomLegalPolicy(space, gym.spaces.Discrete(3), seed=0)
    >>> obs = np.array([[0.5, 0.5, 0, 1, 0], [0.5, 0.5, 0, 0, 1]], np.float32)
    >>> player.compute_actions(obs)[0].tolist()
    [1, 2]
    """

    use_critic = False
    requires_bootstrap_rows = False

    def __init__(
        self, observation_space: gym.Space[Any], action_space: gym.Space[Any], *, seed: int | None
    ) -> None:
        """A Discrete ``action_space`` (masked or not); `ConfigError` for another space."""
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"self-play evaluation: the random legal player needs Discrete actions, not "
                f"{action_space}; set self_play.evaluation_interval=0 to measure nothing"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self._mask_size = int(getattr(observation_space, "action_mask_size", 0))
        self._rng = np.random.default_rng(seed)

    def memory(self, rows: int) -> NoMemory:
        """No memory: it acts on each observation alone."""
        return NoMemory()

    def compute_actions(
        self, obs: npt.NDArray[Any], *, explore: bool = True, **_: Any
    ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[Any]]]:
        """One uniformly drawn legal action per row (``explore`` does not matter), and the
        extra outputs a sampler reads (log-probabilities, zero values, flat logits)."""
        n = int(self.action_space.n)
        if self._mask_size:
            legal = np.asarray(obs)[:, -self._mask_size :] > 0.5
        else:
            legal = np.ones((len(obs), n), bool)
        counts = legal.sum(axis=1)
        if not counts.all():
            raise ValueError("RandomLegalPolicy: an observation has no legal action")
        picks = (self._rng.random(len(obs)) * counts).astype(np.int64)
        actions = np.array([np.flatnonzero(row)[k] for row, k in zip(legal, picks, strict=True)])
        logits = np.where(legal, 0.0, -1e9).astype(np.float32)
        extra = {
            LOGP: -np.log(counts).astype(np.float32),
            VF_PREDS: np.zeros(len(obs), np.float32),
            ACTION_DIST_INPUTS: logits,
        }
        return actions, extra


@dataclass(frozen=True)
class _Matchup:
    """An evaluation mapping: ``learner`` in seat ``episode_id % seats``, ``opponent`` in the
    others (episode ids count from 1, so the learner's seat takes turns)."""

    learner: str
    opponent: str

    def __call__(self, agent_id: str, episode: EpisodeInfo | None = None) -> str:
        if episode is None:
            return self.learner
        seat = episode.episode_id % len(episode.agents)
        return self.learner if episode.agents[seat] == agent_id else self.opponent


def game_outcomes(episodes: list[EpisodeStat], learner: str) -> dict[str, Any]:
    """``learner``'s win / draw / loss rates over ``episodes`` (the sign of its return in
    each: a game's +1 / 0 / -1), overall and by seat (``seats``: ``{agent id: rates}``).

    >>> from rlflow.envs import AgentReturn
    >>> games = [EpisodeStat(0.0, 5, (AgentReturn("x", "me", r), AgentReturn("o", "them", -r)))
    ...          for r in (1.0, 0.0, -1.0, 1.0)]
    >>> out = game_outcomes(games, "me")
    >>> out["win_rate"], out["draw_rate"], out["games"]
    (0.5, 0.25, 4)
    """
    by_seat: dict[str, list[int]] = {}
    for episode in episodes:
        for agent in episode.agent_returns:
            if agent.policy_id == learner:
                counts = by_seat.setdefault(agent.agent_id, [0, 0, 0])
                counts[0 if agent.return_ > 0 else 1 if agent.return_ == 0 else 2] += 1
    total = [sum(c[k] for c in by_seat.values()) for k in range(3)]
    out = _rates(total)
    out["seats"] = {seat: _rates(counts) for seat, counts in sorted(by_seat.items())}
    return out


def _rates(counts: list[int]) -> dict[str, Any]:
    games = sum(counts)
    rates = [c / games if games else 0.0 for c in counts]
    return {"win_rate": rates[0], "draw_rate": rates[1], "loss_rate": rates[2], "games": games}


def measure_learner(
    worker: RolloutWorker,
    learner: str,
    newest: str,
    *,
    games: int,
    seed: int | None,
    explore: bool = False,
    creator: Any = None,
) -> dict[str, Any]:
    """``learner``'s rates (`game_outcomes`) in ``games`` games against a uniformly random
    legal player, ``"vs_random"`` (the learner greedy; sampling with ``explore``), and as many
    against policy ``newest``, ``"vs_previous"`` (both sampling), played on fresh envs of
    ``worker`` (the learner's; built by ``creator`` if given, e.g. one that renders) reset with
    ``seed`` first, the learner's seat taking turns. The worker's training state is
    untouched."""
    policy = worker.get_policy(learner)
    player = RandomLegalPolicy(policy.observation_space, policy.action_space, seed=seed)
    vs_random = worker.evaluate(
        games,
        seed=seed,
        explore=explore,
        creator=creator,
        mapping_fn=_Matchup(learner, RANDOM_PLAYER),
        policies={**worker.policy_map, RANDOM_PLAYER: player},
    )
    vs_newest = worker.evaluate(
        games, seed=seed, explore=True, creator=creator, mapping_fn=_Matchup(learner, newest)
    )
    return {
        "vs_random": game_outcomes(vs_random, learner),
        "vs_previous": game_outcomes(vs_newest, learner),
    }


_RATES = ("win_rate", "draw_rate", "loss_rate")


def headline_rates(per_learner: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The rates that lead a self-play run's results: ``win_rate``, ``draw_rate`` and
    ``loss_rate`` of the learner with the lowest win rate among ``per_learner`` (``{learner:
    rates}``, each with those three keys, or empty while unmeasured); empty while none was
    measured (no NaN for the loggers; a stop criterion on ``win_rate`` waits for the key).

    >>> headline_rates({"a": {"win_rate": 0.9, "draw_rate": 0.1, "loss_rate": 0.0},
    ...                 "b": {"win_rate": 0.5, "draw_rate": 0.0, "loss_rate": 0.5}})
    {'win_rate': 0.5, 'draw_rate': 0.0, 'loss_rate': 0.5}
    """
    measured = [r for r in per_learner.values() if "win_rate" in r]
    if not measured:
        return {}
    lowest = min(measured, key=lambda r: r["win_rate"])
    return {key: float(lowest[key]) for key in _RATES}


class SnapshotPolicies:
    """Keep the self-play pools and measure the learners (the module docstring).

    Items: ``dict -> dict`` (an iteration's result, with ``self_play`` added: ``{learner:
    {"snapshots": n, "vs_pool": rates, "vs_random": rates, "vs_previous": rates, "win_rate":
    w, "draw_rate": d, "loss_rate": l, "measured_at": i}}``, see `game_outcomes`:
    ``vs_random`` and ``vs_previous`` on measuring iterations only; ``vs_pool`` the learner's
    training games against its pool among the result's smoothing window of episodes (absent
    while it finished none); ``win_rate``, ``draw_rate``, ``loss_rate`` those against the
    random player at the latest measurement, iteration ``measured_at`` (absent before the
    first)); and the headline ``win_rate``, ``draw_rate``, ``loss_rate`` at the top level
    (`headline_rates`; absent before the first measurement).
    Use with ``.for_each`` as a plan's last stage. Side effects: on the learner (the local
    worker), snapshot policies' weights; remote workers get them by ``set_weights``; counters
    ``self_play_iterations`` and ``self_play_snapshots`` and the latest measurement
    (``ctx.info``, `rlflow.ops.keys.SELF_PLAY_LATEST`), all kept in checkpoints, so a restored
    run keeps its schedule and headline. The constructor fills every pool with its learner's
    weights and sends them.
    """

    def __init__(self, workers: WorkerSet, config: AlgorithmConfig) -> None:
        """`ConfigError` unless ``config.self_play`` is set, or when measuring is on and a
        learner's actions are not Discrete (the random legal player's)."""
        settings = config.self_play
        if settings is None:
            raise ConfigError("SnapshotPolicies: the config's self_play is None (self-play off)")
        self.workers = workers
        self.settings: SelfPlay = settings
        self.seed = 0 if config.seed is None else config.seed
        self.pools = {p: settings.snapshot_ids(p) for p in config.self_play_learners()}
        local = workers.local_worker()
        if settings.evaluation_interval != 0:  # the random player's space check, before a run
            for learner in self.pools:
                policy = local.get_policy(learner)
                RandomLegalPolicy(policy.observation_space, policy.action_space, seed=None)
        weights = local.get_weights(list(self.pools))
        local.set_weights({s: weights[p] for p, pool in self.pools.items() for s in pool})
        self._send_pools()

    def __call__(self, result: Mapping[str, Any]) -> dict[str, Any]:
        ctx = flow.current_metrics()
        counters = ctx.counters
        counters[keys.NUM_SELF_PLAY_ITERATIONS] += 1
        iteration = counters[keys.NUM_SELF_PLAY_ITERATIONS]
        stats: dict[str, dict[str, Any]] = {p: {} for p in self.pools}
        latest = ctx.info.setdefault(keys.SELF_PLAY_LATEST, {})
        if self.settings.evaluates_at(iteration):
            for learner, pool in self.pools.items():
                stats[learner] = measure_learner(
                    self.workers.local_worker(),
                    learner,
                    pool[0],
                    games=self.settings.evaluation_games,
                    seed=self.seed + iteration + _EVAL_SEED_OFFSET,
                )
                rates = stats[learner]["vs_random"]
                latest[learner] = {**{k: rates[k] for k in _RATES}, "measured_at": iteration}
        if iteration % self.settings.snapshot_every == 0:
            self._snapshot()
            counters[keys.NUM_SELF_PLAY_SNAPSHOTS] += 1
        window = ctx.info.get(keys.RECENT_EPISODES, [])
        for learner in self.pools:
            stats[learner]["snapshots"] = int(counters[keys.NUM_SELF_PLAY_SNAPSHOTS])
            vs_pool = game_outcomes(window, learner)
            if vs_pool["games"]:
                stats[learner]["vs_pool"] = vs_pool
            stats[learner].update(latest.get(learner, {}))
        return {**result, **headline_rates(stats), "self_play": stats}

    def _snapshot(self) -> None:
        local = self.workers.local_worker()
        weights = local.get_weights(
            [*self.pools, *(s for pool in self.pools.values() for s in pool)]
        )
        shifted: dict[str, Any] = {}
        for learner, pool in self.pools.items():
            sources = [learner, *pool[:-1]]  # slot k takes slot k - 1; slot 0 the learner
            shifted.update({slot: weights[src] for slot, src in zip(pool, sources, strict=True)})
        local.set_weights(shifted)
        self._send_pools()

    def _send_pools(self) -> None:
        self.workers.sync_weights(policies=[s for pool in self.pools.values() for s in pool])
