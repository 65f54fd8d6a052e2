"""The depth-limited alpha-beta connect-four player (`rlflow.testing.connect_four`), the
opponent of AlphaZero's connect-four figure: it wins in one, blocks a win in one, agrees with a
plain negamax without pruning, beats a random player, and reads PettingZoo's boards."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rlflow.algorithms.alpha_zero.game import TurnGame
from rlflow.envs.creator import config_env_creator
from rlflow.testing.connect_four import (
    CENTER,
    TWO,
    WIN,
    WINDOWS,
    AlphaBetaPlayer,
    board_from_obs,
    drop,
    heuristic,
    legal_moves,
    search_root,
    wins_at,
)

ENV = "pettingzoo.classic.connect_four_v3"


def board(*moves: int) -> np.ndarray:
    """The board after ``moves`` (columns, alternating, the first by the player now seen as
    +1 if the count is even), from the view of the player to move."""
    b = np.zeros((6, 7), np.int8)
    for c in moves:
        drop(b, c, 1)
        b = -b
    return b


def brute_force(b: np.ndarray, depth: int, piece: int, ply: int) -> int:
    """Negamax without pruning, the same scoring as the player's."""
    moves = legal_moves(b)
    if not moves:
        return 0
    if depth == 0:
        return piece * heuristic(b)
    best = -WIN - 1
    for c in moves:
        r = drop(b, c, piece)
        value = WIN - (ply + 1) if wins_at(b, r, c) else -brute_force(b, depth - 1, -piece, ply + 1)
        b[r, c] = 0
        best = max(best, value)
    return best


def brute_force_root(b: np.ndarray, depth: int) -> tuple[int, list[int]]:
    values = {}
    for c in legal_moves(b):
        work = b.copy()
        r = drop(work, c, 1)
        values[c] = WIN - 1 if wins_at(work, r, c) else -brute_force(work, depth - 1, -1, 1)
    best = max(values.values())
    return best, [c for c in legal_moves(b) if values[c] == best]


def test_windows_and_heuristic_by_hand() -> None:
    assert WINDOWS.shape == (69, 4)  # 24 horizontal, 21 vertical, 12 + 12 diagonal
    b = np.zeros((6, 7), np.int8)
    b[5, 3] = 1
    assert heuristic(b) == CENTER  # one piece: no window of two
    b[5, 2] = 1  # bottom row, columns 2-3: in the windows starting at columns 0, 1, 2
    assert heuristic(b) == 3 * TWO + CENTER
    assert heuristic(-b) == -heuristic(b)
    b[4, 3] = -1  # the opponent's piece in the centre, on top: blocks no horizontal window
    # its own windows: vertical rows 1-4 and 2-5 (2-5 holds a +1 too), diagonals through (4,3)
    assert heuristic(b) == 3 * TWO + CENTER - CENTER


def test_wins_at_every_direction() -> None:
    for cells in (
        [(5, 0), (5, 1), (5, 2), (5, 3)],
        [(5, 6), (4, 6), (3, 6), (2, 6)],
        [(5, 0), (4, 1), (3, 2), (2, 3)],
        [(5, 6), (4, 5), (3, 4), (2, 3)],
    ):
        b = np.zeros((6, 7), np.int8)
        for r, c in cells:
            b[r, c] = -1
        assert all(wins_at(b, r, c) for r, c in cells)
        b[cells[1]] = 1
        assert not any(wins_at(b, r, c) for r, c in cells)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_takes_a_win_in_one(depth: int) -> None:
    # +1 (to move) has 0, 1, 2 on the bottom row; -1 has 0, 1, 2 on the row above (its own
    # win in one at column 3 too): playing 3 wins now.
    b = board(0, 0, 1, 1, 2, 2)
    value, moves = search_root(b, depth)
    assert moves == [3] and value == WIN - 1
    assert AlphaBetaPlayer(depth).move(b) == 3


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_blocks_a_win_in_one(depth: int) -> None:
    # -1 has three stacked in column 6; +1 has no win in one: it must play 6.
    b = board(6, 0, 6, 1, 6)
    assert np.count_nonzero(b) == 5 and (b[3:, 6] == -1).all()
    assert AlphaBetaPlayer(depth).move(b) == 6
    value, moves = search_root(b, depth)
    assert moves == [6] and abs(value) < WIN // 2


def _random_positions(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        b = np.zeros((6, 7), np.int8)
        for _ in range(int(rng.integers(2, 20))):
            c = int(rng.choice(legal_moves(b)))
            r = drop(b, c, 1)
            if wins_at(b, r, c):
                break
            b = -b
        else:
            if legal_moves(b):
                out.append(b)
    return out


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_agrees_with_a_negamax_without_pruning(depth: int) -> None:
    for b in _random_positions(6 if depth < 4 else 3, seed=depth):
        before = b.copy()
        assert search_root(b, depth) == brute_force_root(b, depth)
        np.testing.assert_array_equal(b, before)


def _play(first: AlphaBetaPlayer | None, second: AlphaBetaPlayer | None, rng) -> int:
    """A game on a plain board; None plays uniformly at random. The first mover's outcome."""
    b, sign = np.zeros((6, 7), np.int8), 1
    players = (first, second)
    for ply in range(42):
        player = players[ply % 2]
        c = player.move(b) if player is not None else int(rng.choice(legal_moves(b)))
        r = drop(b, c, 1)
        if wins_at(b, r, c):
            return sign
        b, sign = -b, -sign
    return 0


def test_depth_four_beats_a_random_player_from_either_seat() -> None:
    rng = np.random.default_rng(0)
    me = AlphaBetaPlayer(4, np.random.default_rng(1))
    first = [_play(me, None, rng) for _ in range(20)]
    second = [-_play(None, me, rng) for _ in range(20)]
    assert first.count(1) == 20 and second.count(1) == 20, (first, second)


def test_deeper_is_stronger() -> None:
    rng = np.random.default_rng(0)
    deep, shallow = AlphaBetaPlayer(4, rng), AlphaBetaPlayer(1, rng)
    outcomes = [_play(deep, shallow, rng) for _ in range(5)]
    outcomes += [-_play(shallow, deep, rng) for _ in range(5)]
    assert outcomes.count(1) >= 8, outcomes


def test_reads_pettingzoo_boards_and_plays_through_turn_games() -> None:
    make = config_env_creator(SimpleNamespace(env=ENV, env_config={}, env_wrappers=(), groups=None))
    game = TurnGame.start(make(), seed=0)
    mine = np.zeros((6, 7), np.int8)
    for c in (3, 3, 2, 4, 2, 6):
        np.testing.assert_array_equal(board_from_obs(game.position.obs), mine)
        game.step(c)
        drop(mine, c, 1)
        mine = -mine
    np.testing.assert_array_equal(board_from_obs(game.position.obs), mine)
    # the mover (+1) has 2, 2 and 3 ... its win in one is not there yet; the player answers
    # a legal move through the TurnGame interface, and with its generator a tie at random
    (move,) = AlphaBetaPlayer(2)([game])
    assert game.legal()[move]


def test_ties_are_drawn_with_the_generator() -> None:
    empty = np.zeros((6, 7), np.int8)
    b = board(3, 3)  # mirror-symmetric: at depth 2 columns 3, 2 and 4 tie
    _, tied = search_root(b, 2)
    assert tied == [3, 2, 4] and tied == sorted(tied, key=(3, 2, 4, 1, 5, 0, 6).index)
    picks = {AlphaBetaPlayer(2, np.random.default_rng(s)).move(b) for s in range(20)}
    assert picks == set(tied)
    assert AlphaBetaPlayer(2).move(b) == tied[0]
    assert AlphaBetaPlayer(4).move(empty) == 3
    with pytest.raises(ValueError, match="depth"):
        AlphaBetaPlayer(0)
