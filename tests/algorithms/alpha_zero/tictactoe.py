"""Tic-tac-toe opponents for AlphaZero's tests: a perfect (minimax) player and a random one,
and a match runner that plays many games at once with AlphaZero's batched search."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from rlflow.algorithms.alpha_zero.game import TurnGame
from rlflow.algorithms.alpha_zero.model import network_evaluator
from rlflow.algorithms.alpha_zero.search import Node, run_search, select_action

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
"""Three in a row; a symmetric set, so it holds whichever way actions map to squares."""


def board_of(obs: np.ndarray) -> tuple[int, ...]:
    """The board by action index from the mover's flat observation (PettingZoo tictactoe_v3,
    flattened: square ``a``'s two planes, the mover's and the opponent's marks, at ``2a`` and
    ``2a + 1``): +1 the mover's marks, -1 the opponent's, 0 empty."""
    planes = obs[:18].reshape(9, 2)
    return tuple(int(planes[a, 0]) - int(planes[a, 1]) for a in range(9))


@functools.lru_cache(maxsize=None)
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


def search_player(net: Any, num_simulations: int, c_puct: float) -> Player:
    """AlphaZero with search: every game's tree searched at once, the most visited move."""
    evaluate = network_evaluator(net)
    rng = np.random.default_rng(0)

    def play(games: list[TurnGame]) -> list[int]:
        roots = [Node(g, 9) for g in games]
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
