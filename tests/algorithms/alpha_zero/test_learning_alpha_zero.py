"""Learning tier: AlphaZero on tic-tac-toe (issue 47), the smaller CI target; and on connect
four against a random player (the last test; its figure against alpha-beta is a benchmark).

Issue 47's figure is with search, never losing to a perfect (minimax) player from either seat
and winning >= 0.95 against a uniformly random legal player from either seat. The second half
cannot be met as the second mover: against a uniformly random first mover, the best a player
can do (maximizing its chance to win at every move, computed here by expectimax) is to win
93.9% of games (``test_no_second_mover_wins_95_percent_against_random``); a minimax-optimal
player wins fewer. Measured on 2026-11-29 (2 cores, loaded) with the tuned config
(``alpha_zero/tuned/pettingzoo.classic.tictactoe_v3.yaml``: the local worker, 16 games and 25
simulations per move per iteration), evaluated with search of 100 simulations, 100 games per
seat: after 40, 80 and 120 iterations the first mover drew every game against minimax and won
97-100 against random; the second mover lost 22, 13 and 26 to minimax and won 90-93 against
random, never losing. With 50 simulations per move in self-play and 400 at evaluation, after 60
iterations it drew all 100 games against minimax from both seats (``benchmarks/README.md``,
AlphaZero). That is beyond a CI budget, so this test trains 40 iterations (640 games) and
asserts, with search of 25 simulations and 50 games each, what that reaches with margin: as the
first mover no loss to minimax and >= 0.95 wins against random; as the second mover at most 10%
losses and at least 80% wins against random. Its run: 82 s (the call; 138 s with a benchmark
beside it) on the loaded machine, the same games each time (the local backend and the search
are deterministic): first mover 50 draws against minimax and 49 wins (1 draw) against random,
second mover 44 wins and 6 draws against random.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rlflow.algorithms import tuned_config
from rlflow.algorithms.alpha_zero.game import TurnGame
from rlflow.algorithms.alpha_zero.model import network_evaluator
from rlflow.algorithms.alpha_zero.search import Node, run_search, select_action
from rlflow.envs.creator import config_env_creator
from rlflow.trainer import Trainer

pytestmark = [pytest.mark.learning, pytest.mark.timeout(600)]

ENV = "pettingzoo.classic.tictactoe_v3"
ITERATIONS = 40
GAMES = 50


LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
"""Three in a row; a symmetric set, so it holds whichever way actions map to squares."""


def board_of(obs: np.ndarray) -> tuple[int, ...]:
    """The board by action index from the mover's flat observation (PettingZoo tictactoe_v3,
    flattened: square ``a``'s two planes, the mover's and the opponent's marks, at ``2a`` and
    ``2a + 1``): +1 the mover's marks, -1 the opponent's, 0 empty."""
    planes = obs[:18].reshape(9, 2)
    return tuple(int(planes[a, 0]) - int(planes[a, 1]) for a in range(9))


@functools.cache
def negamax(board: tuple[int, ...]) -> int:
    """The value for the mover (+1 the mover's marks) of ``board`` with perfect play: 1 win,
    0 draw, -1 loss."""
    for line in LINES:
        s = sum(board[i] for i in line)
        if s == -3:
            return -1  # the opponent just completed a line
    empty = [a for a in range(9) if board[a] == 0]
    if not empty:
        return 0
    return max(-negamax(_after(board, a)) for a in empty)


def _after(board: tuple[int, ...], action: int) -> tuple[int, ...]:
    """The board seen by the next mover after the mover plays ``action``."""
    return tuple(-(1 if a == action else v) for a, v in enumerate(board))


def optimal_moves(board: tuple[int, ...]) -> list[int]:
    """Every move with the best minimax value."""
    empty = [a for a in range(9) if board[a] == 0]
    values = {a: -negamax(_after(board, a)) for a in empty}
    best = max(values.values())
    return [a for a in empty if values[a] == best]


Player = Callable[[list[TurnGame]], list[int]]
"""Moves for a list of games (each at its mover's turn)."""


def minimax_player(rng: np.random.Generator) -> Player:
    """A perfect player: one of the optimal moves, at random."""

    def play(games: list[TurnGame]) -> list[int]:
        out = []
        for g in games:
            moves = optimal_moves(board_of(g.position.obs))  # type: ignore[arg-type]
            out.append(int(rng.choice(moves)))
        return out

    return play


def random_player(rng: np.random.Generator) -> Player:
    """A uniformly random legal player."""
    return lambda games: [int(rng.choice(np.flatnonzero(g.legal()))) for g in games]


def search_player(net: Any, num_simulations: int, c_puct: float, actions: int = 9) -> Player:
    """AlphaZero with search: every game's tree searched at once, the most visited move."""
    evaluate = network_evaluator(net)
    rng = np.random.default_rng(0)

    def play(games: list[TurnGame]) -> list[int]:
        roots = [Node(g, actions) for g in games]
        run_search(roots, evaluate, num_simulations=num_simulations, c_puct=c_puct)
        return [select_action(r, explore=False, rng=rng) for r in roots]

    return play


def play_match(
    make_env: Callable[[], Any], learner: Player, opponent: Player, *, games: int, seat: int
) -> dict[str, int]:
    """``games`` games at once, ``learner`` in seat ``seat`` (0: moves first); its wins,
    draws and losses."""
    tables = [TurnGame.start(make_env(), seed=k) for k in range(games)]
    first = [t.position.player for t in tables]
    learner_id = {k: None for k in range(games)}
    result = {"win": 0, "draw": 0, "loss": 0}
    move = 0
    active = list(range(games))
    while active:
        mine = (move % 2) == seat
        chooser = learner if mine else opponent
        actions = chooser([tables[k] for k in active])
        for k, a in zip(active, actions, strict=True):
            if mine and learner_id[k] is None:
                learner_id[k] = tables[k].position.player
            tables[k].step(a)
        move += 1
        active = [k for k in active if not tables[k].position.over]
    for k in range(games):
        rewards = tables[k].position.rewards
        me = learner_id[k] or next(a for a in rewards if a != first[k])
        r = rewards[me]
        result["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
    return result


def test_alpha_zero_learns_tictactoe_to_a_draw_with_minimax_as_first_mover(
    local_backend: None,
) -> None:
    config = tuned_config("alpha_zero", ENV)
    trainer = Trainer("alpha_zero", backend="local", config=config, seed=0)
    try:
        for _ in range(ITERATIONS):
            trainer.train()
        net = trainer.workers.local_worker().get_policy().model
    finally:
        trainer.stop()
    make = config_env_creator(SimpleNamespace(env=ENV, env_config={}, env_wrappers=(), groups=None))
    rng = np.random.default_rng(0)
    me = search_player(net, config.num_simulations, config.c_puct)
    first_minimax = play_match(make, me, minimax_player(rng), games=GAMES, seat=0)
    first_random = play_match(make, me, random_player(rng), games=GAMES, seat=0)
    second_random = play_match(make, me, random_player(rng), games=GAMES, seat=1)
    print(
        f"\nfirst vs minimax {first_minimax}, vs random {first_random}; second vs random "
        f"{second_random}"
    )
    assert first_minimax["loss"] == 0, first_minimax
    assert first_random["win"] >= 0.95 * GAMES, first_random
    assert second_random["loss"] <= 0.1 * GAMES, second_random
    assert second_random["win"] >= 0.8 * GAMES, second_random


@functools.cache
def best_win_chance(board: tuple[int, ...], learner_moves: bool) -> float:
    """The learner's (+1) highest chance to win against a uniformly random player (-1)."""
    for line in LINES:
        total = sum(board[i] for i in line)
        if abs(total) == 3:
            return 1.0 if total == 3 else 0.0
    empty = [a for a in range(9) if board[a] == 0]
    if not empty:
        return 0.0
    mark = 1 if learner_moves else -1
    chances = [
        best_win_chance(
            tuple(mark if i == a else v for i, v in enumerate(board)), not learner_moves
        )
        for a in empty
    ]
    return max(chances) if learner_moves else sum(chances) / len(chances)


def test_no_second_mover_wins_95_percent_against_random() -> None:
    assert best_win_chance((0,) * 9, False) == pytest.approx(0.9386, abs=1e-4)
    assert best_win_chance((0,) * 9, True) == pytest.approx(0.9948, abs=1e-4)


C4_ENV = "pettingzoo.classic.connect_four_v3"
C4_ITERATIONS = 20
C4_GAMES = 20


def test_alpha_zero_learns_connect_four_to_beat_random_from_either_seat(
    local_backend: None,
) -> None:
    """Connect four, the smaller CI target of issue 47's figure (the benchmark,
    ``benchmarks/alpha_zero.py --part connect_four``, has the curve against the depth-4
    alpha-beta player): the tuned network on the local worker, 16 games and 25 simulations per
    move per iteration, 20 iterations (320 games); then with search of 25 simulations it wins
    >= 0.85 of 20 games from each seat against a uniformly random legal player. The same search
    with an untrained network won 19 and 16 of 25 (first and second seat); these 20 iterations'
    network won 25 of 25 from each seat (2026-11-29, ``benchmarks/README.md``, AlphaZero), and
    here 20 of 20 as the first mover and 19 of 20 as the second (the local backend and the
    search are deterministic: the same games each run); the call took 117 s at load average
    12 and 48 s at 5-8."""
    config = tuned_config("alpha_zero", C4_ENV).replace(
        num_workers=0, num_simulations=25, games_per_worker=16
    )
    trainer = Trainer("alpha_zero", backend="local", config=config, seed=0)
    try:
        for _ in range(C4_ITERATIONS):
            trainer.train()
        net = trainer.workers.local_worker().get_policy().model
    finally:
        trainer.stop()
    make = config_env_creator(
        SimpleNamespace(env=C4_ENV, env_config={}, env_wrappers=(), groups=None)
    )
    rng = np.random.default_rng(0)
    me = search_player(net, config.num_simulations, config.c_puct, actions=7)
    first = play_match(make, me, random_player(rng), games=C4_GAMES, seat=0)
    second = play_match(make, me, random_player(rng), games=C4_GAMES, seat=1)
    print(f"\nconnect four vs random: first {first}, second {second}")
    assert first["win"] >= 0.85 * C4_GAMES, first
    assert second["win"] >= 0.85 * C4_GAMES, second
