"""The AlphaZero plan: workers play self-play games with search, a replay, the learner, weights.

Silver et al., "A general reinforcement learning algorithm that masters chess, shogi and Go
through self-play" (Science, 2018), as a dataflow::

    (1) self_play_games: every rollout worker (the local one without remote workers) gets the
            learner's weights and plays games_per_worker games at once, each move a PUCT
            search over copies of the game (self_play.play_games); the leaves of all its
            searches go to the network in batches, its own copy or, with evaluator="shared",
            one InferenceServer actor that batches every worker's leaves (nested dataflow)
    (2) -> StoreGames                        # the positions (observation, visit counts,
                                             # outcome for the mover) into the replay of the
                                             # last replay_capacity positions
    (3) -> TrainOnReplay                     # num_sgd_iter minibatches drawn from it:
                                             # cross-entropy to the visit counts, squared
                                             # error to the outcome, L2
    (4) -> EvaluateWithSearch                # with evaluation_games: games against a
                                             # random player, every move searched
    (5) -> standard_metrics_reporting        # the games' outcomes, simulations/s, results

The new weights reach the workers (or the inference server) with the next round of (1).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow import flow
from rlflow.algorithms.alpha_zero.config import AlphaZeroConfig
from rlflow.algorithms.alpha_zero.policy import MCTS_POLICY, VALUE_TARGET, AlphaZeroPolicy
from rlflow.algorithms.alpha_zero.self_play import (
    GamesPlayed,
    InferenceServer,
    evaluate_against_random,
    play_games,
)
from rlflow.data.sample_batch import OBS, SampleBatch
from rlflow.errors import ConfigError, WorkerError
from rlflow.flow import LocalIterator
from rlflow.ops import TrainResult, keys, record_learner_info, standard_metrics_reporting
from rlflow.ops.metrics import report_episodes
from rlflow.workers import WorkerSet

__all__ = [
    "EvaluateWithSearch",
    "PlayGames",
    "PositionReplay",
    "StoreGames",
    "TrainOnReplay",
    "alpha_zero_plan",
    "self_play_games",
]

Array = npt.NDArray[Any]


def alpha_zero_plan(workers: WorkerSet, config: AlphaZeroConfig) -> LocalIterator[dict[str, Any]]:
    """Build the AlphaZero plan over ``workers``; each item is one iteration's result dict."""
    # (1) Self-play games, every move searched.
    games = self_play_games(workers, config)
    # (2) Into the replay; (3) minibatches from it train the network.
    replay = PositionReplay(config.replay_capacity, seed=config.seed)
    train_op = games.for_each(StoreGames(replay)).for_each(TrainOnReplay(workers, replay, config))
    # (4) Evaluation with search; (5) results.
    train_op = train_op.for_each(EvaluateWithSearch(workers, config))
    return standard_metrics_reporting(train_op, workers, config)


def self_play_games(workers: WorkerSet, config: AlphaZeroConfig) -> LocalIterator[GamesPlayed]:
    """Source of one `GamesPlayed` per iteration: every worker's games of the round.

    Items: ``GamesPlayed`` (all workers' positions concatenated). Side effects: see
    :class:`PlayGames`; with ``evaluator="shared"`` one `InferenceServer` actor is started here.
    """
    # A stage, not the source itself: it runs inside the plan's context (counters).
    rounds = PlayGames(workers, config)
    return flow.from_iterable(itertools.count(), name="self_play_rounds").for_each(rounds)


class PlayGames:
    """One round of self-play on every worker; see :func:`self_play_games`.

    Items: ``int`` (the round, ignored) ``-> GamesPlayed``. Use with ``.for_each`` on a counting
    source. Side effects: one ``put`` of the learner's weights per round, sent to every remote
    worker (or loaded into the inference server); counters ``num_env_steps_sampled`` and
    ``num_agent_steps_sampled`` (positions), ``num_weight_syncs``; the games as the run's
    episodes (`rlflow.ops.metrics.report_episodes`); ``info["alpha_zero"]``: the round's
    simulations, evaluations, simulations/s and mean batch size.
    """

    def __init__(self, workers: WorkerSet, config: AlphaZeroConfig) -> None:
        """Keep the workers; start the inference server when ``evaluator="shared"``."""
        self.workers, self.config = workers, config
        self.rng = np.random.default_rng(config.seed)
        policy = workers.local_worker().get_policy()
        if not isinstance(policy, AlphaZeroPolicy):
            raise ConfigError(f"self_play_games needs an AlphaZeroPolicy, got {type(policy)}")
        self.policy = policy
        self.server: Any = None
        if config.evaluator == "shared":
            model = config.model
            self.server = (
                flow.remote(InferenceServer)
                .options(num_cpus=0, max_concurrency=max(2, config.num_workers + 1))
                .remote(
                    int(policy.observation_space.shape[0]),  # type: ignore[index]
                    int(policy.action_space.n),  # type: ignore[attr-defined]
                    tuple(model.hidden),
                    model.activation,
                    config.num_torch_threads,
                )
            )

    def __call__(self, _round: int) -> GamesPlayed:
        ctx = flow.current_metrics()
        weights = self.policy.get_weights()
        handles = self.workers.remote_workers()
        seeds = [int(s) for s in self.rng.integers(0, 2**31 - 1, max(1, len(handles)))]
        if not handles:
            parts = [play_games(self.workers.local_worker(), None, seeds[0])]
        else:
            if self.server is not None:
                flow.get(self.server.set_weights.remote(weights))
                ref = None
            else:
                ref = flow.put(weights)
            ctx.counters[keys.NUM_WEIGHT_SYNCS] += 1
            calls = [
                h.apply.remote(play_games, ref, seed, self.server)
                for h, seed in zip(handles, seeds, strict=True)
            ]
            try:
                parts = flow.get(calls)
            except WorkerError as err:
                raise self.workers.worker_failure(err) from err
        return self._record(_merge(parts))

    def _record(self, games: GamesPlayed) -> GamesPlayed:
        ctx = flow.current_metrics()
        steps = len(games.value_target)
        ctx.counters[keys.NUM_ENV_STEPS_SAMPLED] += steps
        ctx.counters[keys.NUM_AGENT_STEPS_SAMPLED] += steps
        report_episodes(games.episodes)
        seconds = max(games.search_time_s, 1e-9)
        ctx.info["alpha_zero"] = {
            "games": len(games.episodes),
            "positions": steps,
            "simulations": games.simulations,
            "evaluations": games.evaluations,
            "simulations_per_s": games.simulations / seconds,
            "evaluator": self.config.evaluator,
        }
        return games


def _merge(parts: list[GamesPlayed]) -> GamesPlayed:
    """One `GamesPlayed` of several workers' (their search seconds: the slowest's, since they
    ran at once)."""
    return GamesPlayed(
        np.concatenate([p.obs for p in parts]),
        np.concatenate([p.mcts_policy for p in parts]),
        np.concatenate([p.value_target for p in parts]),
        [e for p in parts for e in p.episodes],
        sum(p.simulations for p in parts),
        sum(p.evaluations for p in parts),
        max(p.search_time_s for p in parts),
    )


class PositionReplay:
    """The last ``capacity`` positions of self-play (a ring), drawn uniformly.

    Args:
        capacity: positions kept.
        seed: seeds the draws.
    """

    def __init__(self, capacity: int, *, seed: int | None = None) -> None:
        """An empty replay."""
        self.capacity = int(capacity)
        self.columns: dict[str, Array] = {}
        self.size = 0
        self.next = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, columns: dict[str, Array]) -> None:
        """Add rows (the oldest are overwritten once full)."""
        n = len(next(iter(columns.values())))
        if not self.columns:
            self.columns = {
                k: np.zeros((self.capacity, *np.asarray(v).shape[1:]), np.float32)
                for k, v in columns.items()
            }
        index = (self.next + np.arange(n)) % self.capacity
        for k, v in columns.items():
            self.columns[k][index] = v
        self.next = int((self.next + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)

    def sample(self, count: int) -> SampleBatch:
        """``count`` rows drawn uniformly with replacement."""
        index = self.rng.integers(0, self.size, count)
        return SampleBatch({k: v[index] for k, v in self.columns.items()})


class StoreGames:
    """Store a round's positions in the replay.

    Items: ``GamesPlayed -> GamesPlayed``. Use with ``.for_each`` after
    :func:`self_play_games`. Side effects: the replay; counter ``num_env_steps_stored``.
    """

    def __init__(self, replay: PositionReplay) -> None:
        """Keep the replay."""
        self.replay = replay

    def __call__(self, games: GamesPlayed) -> GamesPlayed:
        self.replay.add(
            {OBS: games.obs, MCTS_POLICY: games.mcts_policy, VALUE_TARGET: games.value_target}
        )
        flow.current_metrics().counters[keys.NUM_ENV_STEPS_STORED] += len(games.value_target)
        return games


class TrainOnReplay:
    """``num_sgd_iter`` optimizer steps on minibatches of ``sgd_minibatch_size`` positions
    drawn from the replay.

    Items: ``GamesPlayed -> TrainResult``. Use with ``.for_each`` after :class:`StoreGames`.
    Side effects: the learner's network; counters ``num_env_steps_trained``,
    ``num_agent_steps_trained`` (rows drawn), ``num_train_steps``; ``info["learner"]``.
    """

    def __init__(self, workers: WorkerSet, replay: PositionReplay, config: AlphaZeroConfig):
        """Keep the learner's policy, the replay and the settings."""
        self.policy = workers.local_worker().get_policy()
        self.replay, self.config = replay, config

    def __call__(self, _games: GamesPlayed) -> TrainResult:
        config, ctx = self.config, flow.current_metrics()
        if not len(self.replay):
            return TrainResult(0, {})
        stats: dict[str, float] = {}
        for _ in range(config.num_sgd_iter):
            batch = self.replay.sample(config.sgd_minibatch_size)
            step = self.policy.update.learn_on_batch(batch)
            for k, v in step.items():
                if np.ndim(v) == 0:
                    stats[k] = stats.get(k, 0.0) + float(v) / config.num_sgd_iter
        rows = config.num_sgd_iter * config.sgd_minibatch_size
        ctx.counters[keys.NUM_ENV_STEPS_TRAINED] += rows
        ctx.counters[keys.NUM_AGENT_STEPS_TRAINED] += rows
        ctx.counters[keys.NUM_TRAIN_STEPS] += config.num_sgd_iter
        record_learner_info({self.policy.policy_id: stats})
        return TrainResult(rows, {self.policy.policy_id: stats})


class EvaluateWithSearch:
    """Games against a uniformly random legal player after each update, the learner's moves
    searched (`rlflow.algorithms.alpha_zero.self_play.evaluate_against_random`, on the local
    worker's network); nothing with ``evaluation_games`` 0.

    Items: ``TrainResult -> TrainResult``. Use with ``.for_each`` after :class:`TrainOnReplay`.
    Side effects: ``info["alpha_zero"]["vs_random"]`` (win, draw and loss rates; by seat).
    """

    def __init__(self, workers: WorkerSet, config: AlphaZeroConfig) -> None:
        """Keep the local worker and the number of games."""
        self.worker, self.games = workers.local_worker(), config.evaluation_games
        self.rng = np.random.default_rng(None if config.seed is None else config.seed + 1)

    def __call__(self, item: TrainResult) -> TrainResult:
        if self.games:
            seed = int(self.rng.integers(0, 2**31 - 1))
            rates = evaluate_against_random(self.worker, self.games, seed)
            flow.current_metrics().info.setdefault("alpha_zero", {})["vs_random"] = rates
        return item
