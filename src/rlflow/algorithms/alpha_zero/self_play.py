"""Worker side of AlphaZero: games of self-play, every move chosen by a batched search.

A rollout worker runs :func:`play_games` (sent as ``handle.apply.remote(play_games, ...)``): it
plays ``games_per_worker`` games at once, both seats searched with the same network; each move
is a search per game (`rlflow.algorithms.alpha_zero.search.run_search`), the leaves of all the
worker's trees evaluated in one batch per round. With ``evaluator="local"`` the worker's own
copy of the network evaluates them; with ``"shared"`` an :class:`InferenceServer` actor does,
for every worker at once: what several workers send while it computes is evaluated as one batch
(the nested dataflow). Each position's row is the mover's observation, the search's visit
counts (the policy target) and the game's outcome for the mover (the value target).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from rlflow import flow
from rlflow.algorithms.alpha_zero.config import AlphaZeroConfig
from rlflow.algorithms.alpha_zero.game import TurnGame
from rlflow.algorithms.alpha_zero.model import AlphaZeroNet, network_evaluator
from rlflow.algorithms.alpha_zero.search import (
    Evaluator,
    Node,
    run_search,
    select_action,
    visit_policy,
)
from rlflow.envs.records import AgentReturn, EpisodeStat
from rlflow.workers.rollout_worker import RolloutWorker

__all__ = [
    "GamesPlayed",
    "InferenceServer",
    "evaluate_against_random",
    "play_games",
    "remote_evaluator",
]

Array = npt.NDArray[Any]


class GamesPlayed(NamedTuple):
    """What a worker answers: every position of its games, and how the games went."""

    obs: npt.NDArray[np.float32]
    """``[T, D]`` the movers' observations."""
    mcts_policy: npt.NDArray[np.float32]
    """``[T, A]`` the searches' visit counts, normalized."""
    value_target: npt.NDArray[np.float32]
    """``[T]`` each game's outcome for the position's mover (+1 win, -1 loss, 0 draw)."""
    episodes: list[EpisodeStat]
    """One per game: its length in moves and each agent's outcome."""
    simulations: int
    """Simulations the searches ran."""
    evaluations: int
    """Leaves (and roots) the network evaluated."""
    search_time_s: float
    """Seconds spent searching (evaluations included)."""


_ENVS: weakref.WeakKeyDictionary[RolloutWorker, list[Any]] = weakref.WeakKeyDictionary()
"""Each worker's games, built on first use and reused."""


def _envs(worker: RolloutWorker, count: int) -> list[Any]:
    envs = _ENVS.setdefault(worker, [])
    while len(envs) < count:
        envs.append(worker.sampler_spec.creator())
    return envs[:count]


class _Counting:
    """An evaluator that counts the rows it evaluated."""

    def __init__(self, evaluate: Evaluator) -> None:
        self.evaluate, self.rows = evaluate, 0

    def __call__(self, obs: Array) -> tuple[Array, Array]:
        self.rows += len(obs)
        return self.evaluate(obs)


def play_games(
    worker: RolloutWorker, weights: dict[str, Array] | None, seed: int, server: Any = None
) -> GamesPlayed:
    """Worker side: set ``weights`` (None: keep them), then play ``games_per_worker`` games of
    self-play at once (module docstring), the envs reset with ``seed + k``; leaves evaluated by
    the worker's network, or by ``server`` (an :class:`InferenceServer` handle)."""
    config = worker.config
    assert isinstance(config, AlphaZeroConfig)
    policy = worker.get_policy()
    if weights is not None:
        policy.set_weights(weights)
    local = network_evaluator(policy.model, policy.device)
    evaluate = _Counting(local if server is None else remote_evaluator(server))
    rng = np.random.default_rng(seed)
    games = [
        TurnGame.start(env, seed=seed + k)
        for k, env in enumerate(_envs(worker, config.games_per_worker))
    ]
    rows: list[list[tuple[Array, Array, str]]] = [[] for _ in games]
    active = list(range(len(games)))
    num_actions = int(policy.action_space.n)  # type: ignore[attr-defined]
    moves, simulations, start = [0] * len(games), 0, time.perf_counter()
    while active:
        roots = [Node(games[i], num_actions) for i in active]
        run_search(
            roots,
            evaluate,
            num_simulations=config.num_simulations,
            c_puct=config.c_puct,
            virtual_loss=config.virtual_loss,
            leaves_per_search=config.leaves_per_search,
            noise=(config.dirichlet_alpha, config.dirichlet_epsilon),
            rng=rng,
        )
        simulations += config.num_simulations * len(roots)
        for i, root in zip(active, roots, strict=True):
            explore = moves[i] < config.temperature_moves
            action = select_action(root, explore=explore, rng=rng)
            obs = root.game.position.obs
            assert obs is not None and root.player is not None
            rows[i].append((obs, visit_policy(root), root.player))
            games[i].step(action)
            moves[i] += 1
        active = [i for i in active if not games[i].position.over]
    return _answer(games, rows, simulations, evaluate.rows, time.perf_counter() - start, policy)


def _answer(
    games: list[TurnGame],
    rows: list[list[tuple[Array, Array, str]]],
    simulations: int,
    evaluations: int,
    seconds: float,
    policy: Any,
) -> GamesPlayed:
    obs, pis, zs, episodes = [], [], [], []
    for game, game_rows in zip(games, rows, strict=True):
        outcome = game.position.rewards
        for o, pi, player in game_rows:
            obs.append(o)
            pis.append(pi)
            zs.append(float(outcome.get(player, 0.0)))
        returns = tuple(
            AgentReturn(agent, policy.policy_id, float(r)) for agent, r in sorted(outcome.items())
        )
        episodes.append(EpisodeStat(float(sum(outcome.values())), len(game_rows), returns))
    return GamesPlayed(
        np.stack(obs).astype(np.float32),
        np.stack(pis).astype(np.float32),
        np.asarray(zs, np.float32),
        episodes,
        simulations,
        evaluations,
        seconds,
    )


def evaluate_against_random(worker: RolloutWorker, games: int, seed: int) -> dict[str, Any]:
    """Play ``games`` games at once against a uniformly random legal player, the worker's
    network searching every one of its moves (no noise, the most visited move); the learner
    moves first in the even-numbered games. Returns ``{"win_rate", "draw_rate", "loss_rate",
    "seats": {agent: {...}}}`` (rates over the games; by the learner's seat)."""
    config = worker.config
    assert isinstance(config, AlphaZeroConfig)
    policy = worker.get_policy()
    evaluate = network_evaluator(policy.model, policy.device)
    rng = np.random.default_rng(seed)
    num_actions = int(policy.action_space.n)  # type: ignore[attr-defined]
    tables = [TurnGame.start(worker.sampler_spec.creator(), seed=seed + k) for k in range(games)]
    learner: dict[int, str] = {}
    active, move = list(range(games)), 0
    while active:
        searched = [k for k in active if move % 2 == k % 2]
        roots = [Node(tables[k], num_actions) for k in searched]
        if roots:
            run_search(
                roots, evaluate, num_simulations=config.num_simulations, c_puct=config.c_puct
            )
        chosen = {
            k: select_action(r, explore=False, rng=rng)
            for k, r in zip(searched, roots, strict=True)
        }
        for k in active:
            if k in chosen:
                learner.setdefault(k, str(tables[k].position.player))
                tables[k].step(chosen[k])
            else:
                tables[k].step(int(rng.choice(np.flatnonzero(tables[k].legal()))))
        move += 1
        active = [k for k in active if not tables[k].position.over]
    outcomes = {k: tables[k].position.rewards[learner[k]] for k in range(games)}
    seats = {learner[k] for k in range(games)}
    return {
        **_rates(list(outcomes.values())),
        "seats": {s: _rates([r for k, r in outcomes.items() if learner[k] == s]) for s in seats},
    }


def _rates(rewards: list[float]) -> dict[str, float]:
    n = max(1, len(rewards))
    return {
        "win_rate": sum(r > 0 for r in rewards) / n,
        "draw_rate": sum(r == 0 for r in rewards) / n,
        "loss_rate": sum(r < 0 for r in rewards) / n,
    }


def remote_evaluator(server: Any) -> Evaluator:
    """An `Evaluator` that sends each batch to the :class:`InferenceServer` ``server`` and
    waits for its answer."""

    def evaluate(obs: Array) -> tuple[Array, Array]:
        priors, values = flow.get(server.evaluate.remote(obs))
        return priors, values

    return evaluate


class InferenceServer:
    """A shared evaluator: one copy of the network that many workers' searches feed.

    Calls may overlap (a threaded actor, ``max_concurrency`` >= the workers): a call that
    arrives while a batch is being evaluated waits, and the waiting calls' observations are then
    evaluated together, as one batch, by the first of them; each gets its own rows back.

    Args:
        obs_size: the flat observation's size (mask included).
        num_actions: the actions.
        hidden: the trunk's widths.
        activation: its activation.
        num_threads: torch's threads in this actor.
    """

    def __init__(
        self,
        obs_size: int,
        num_actions: int,
        hidden: tuple[int, ...],
        activation: str,
        num_threads: int = 1,
    ) -> None:
        """Build the network (weights come with :meth:`set_weights`)."""
        torch.set_num_threads(int(num_threads))
        self.net = AlphaZeroNet(obs_size, num_actions, tuple(hidden), activation)
        self.evaluate_batch = network_evaluator(self.net)
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False
        self.batches = 0
        """Batches evaluated so far."""
        self.requests = 0
        """Calls answered so far."""

    def set_weights(self, weights: dict[str, Array]) -> None:
        """Load the learner's weights (a policy's ``get_weights()``)."""
        state = {k: torch.as_tensor(np.array(v)) for k, v in weights.items()}
        with self._cond:
            self.net.load_state_dict(state)

    def stats(self) -> dict[str, int]:
        """``{"batches": ..., "requests": ...}`` so far."""
        return {"batches": self.batches, "requests": self.requests}

    def evaluate(self, obs: Array) -> tuple[Array, Array]:
        """``(priors, values)`` of ``obs``, evaluated in one batch with whatever other calls
        are waiting (an error of that batch is raised in each of them)."""
        request = _Request(np.asarray(obs, np.float32))
        with self._cond:
            self._queue.append(request)
            while request.result is None:
                if self._busy:
                    self._cond.wait()
                    continue
                batch, self._queue, self._busy = self._queue, [], True
                self._cond.release()
                try:
                    results: list[Any] = self._run(batch)
                except Exception as err:  # noqa: BLE001 - every waiting caller gets it
                    results = [err] * len(batch)
                finally:
                    self._cond.acquire()
                    self._busy = False
                for req, result in zip(batch, results, strict=True):
                    req.result = result
                self.batches += 1
                self.requests += len(batch)
                self._cond.notify_all()
        if isinstance(request.result, BaseException):
            raise request.result
        priors, values = request.result
        return priors, values

    def _run(self, batch: list[_Request]) -> list[tuple[Array, Array]]:
        sizes = [len(r.obs) for r in batch]
        priors, values = self.evaluate_batch(np.concatenate([r.obs for r in batch]))
        cuts = np.cumsum(sizes)[:-1]
        return list(zip(np.split(priors, cuts), np.split(values, cuts), strict=True))


class _Request:
    __slots__ = ("obs", "result")

    def __init__(self, obs: Array) -> None:
        self.obs = obs
        self.result: Any = None  # (priors, values), or the error of its batch
