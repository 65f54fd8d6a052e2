"""A depth-limited alpha-beta connect-four player: the opponent of AlphaZero's connect-four
figure (issue 47; ``benchmarks/alpha_zero.py --part connect_four`` and the learning test in
``tests/algorithms/alpha_zero/test_learning_alpha_zero.py``).

The board is a numpy ``int8`` array ``[6, 7]`` in PettingZoo's ``connect_four_v3`` layout: row 0
the top, column ``c`` the action ``c`` (a piece dropped in column ``c`` falls to the lowest empty
row); ``+1`` the pieces of the player to move, ``-1`` the opponent's, ``0`` empty.
:func:`board_from_obs` reads it from the mover's flat observation as rlflow builds it (the
``(6, 7, 2)`` planes, the mover's first, flattened, the action mask last).

The search is negamax with alpha-beta pruning (fail-soft), ``depth`` plies (moves) deep, the
moves tried centre first (columns 3, 2, 4, 1, 5, 0, 6):

- a move that completes four in a row (exact detection through the piece just played) is a win
  worth ``WIN - ply`` (``ply`` = moves from the root, that one included: a quicker win is better
  and a later loss less bad); a full board with no four is a draw, 0;
- at depth 0 the position is scored by :func:`heuristic`, for the player to move: over the 69
  windows of four cells (rows, columns, both diagonals), each window holding pieces of one
  player only counts for that player ``THREE`` (5) with three pieces and an empty cell, ``TWO``
  (2) with two and two empty; plus ``CENTER`` (3) per piece in the centre column; the
  opponent's the same, subtracted (so ``heuristic(-b) == -heuristic(b)``).

Ties at the root are kept exact (each move after the first is searched with the window's lower
edge one below the best value so far, the scores being integers), and :meth:`AlphaBetaPlayer.move`
picks among the equal-best moves with its seeded generator (``rng``), or the first of them in
centre-first order without one (deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "CENTER",
    "COLUMNS",
    "ORDER",
    "ROWS",
    "THREE",
    "TWO",
    "WIN",
    "WINDOWS",
    "AlphaBetaPlayer",
    "board_from_obs",
    "drop",
    "heuristic",
    "legal_moves",
    "negamax",
    "search_root",
    "wins_at",
]

Board = npt.NDArray[np.int8]

ROWS, COLUMNS = 6, 7
"""The board's size (PettingZoo's ``connect_four_v3``)."""
ORDER = (3, 2, 4, 1, 5, 0, 6)
"""The order moves are tried in: centre first."""
WIN = 1_000_000
"""A win's score (less the moves it takes); far above any heuristic score."""
THREE, TWO, CENTER = 5, 2, 3
"""The heuristic's weights (module docstring)."""


def _windows() -> npt.NDArray[np.intp]:
    cells = []
    for r in range(ROWS):
        for c in range(COLUMNS):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                line = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLUMNS for rr, cc in line):
                    cells.append([rr * COLUMNS + cc for rr, cc in line])
    return np.asarray(cells, np.intp)


WINDOWS = _windows()
"""``[69, 4]`` flat cell indices (``row * 7 + column``) of every window of four in a line."""


def board_from_obs(obs: npt.ArrayLike) -> Board:
    """The board (module docstring) from the mover's flat ``connect_four_v3`` observation: the
    ``(6, 7, 2)`` planes flattened (the mover's pieces in plane 0, the opponent's in plane 1),
    anything after the first 84 values (the action mask) ignored."""
    planes = np.asarray(obs, np.float32).reshape(-1)[: ROWS * COLUMNS * 2].reshape(ROWS, COLUMNS, 2)
    return (planes[..., 0].round() - planes[..., 1].round()).astype(np.int8)


def legal_moves(board: Board) -> list[int]:
    """The columns with room, centre first (`ORDER`)."""
    return [c for c in ORDER if board[0, c] == 0]


def drop(board: Board, column: int, piece: int) -> int:
    """Drop ``piece`` (+1 or -1) in ``column`` in place; the row it lands in."""
    for row in range(ROWS - 1, -1, -1):
        if board[row, column] == 0:
            board[row, column] = piece
            return row
    raise ValueError(f"column {column} is full")


def wins_at(board: Board, row: int, column: int) -> bool:
    """Whether the piece at ``(row, column)`` is in four (or more) in a line."""
    piece = board[row, column]
    if piece == 0:
        return False
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLUMNS and board[r, c] == piece:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def heuristic(board: Board) -> int:
    """The score of ``board`` for the ``+1`` player (module docstring); antisymmetric."""
    w = board.reshape(-1)[WINDOWS]
    own, opp = (w == 1).sum(1), (w == -1).sum(1)
    score = CENTER * int(board[:, COLUMNS // 2].sum())
    for count, weight in ((3, THREE), (2, TWO)):
        score += weight * int(((own == count) & (opp == 0)).sum())
        score -= weight * int(((opp == count) & (own == 0)).sum())
    return score


def negamax(board: Board, depth: int, alpha: float, beta: float, piece: int, ply: int = 0) -> int:
    """The value for ``piece`` (the player to move, +1 or -1) of ``board``, searched ``depth``
    plies with alpha-beta pruning in the window ``(alpha, beta)`` (fail-soft: a value <= alpha is
    an upper bound, >= beta a lower bound); ``ply`` moves were made since the root. ``board`` is
    restored before returning."""
    moves = legal_moves(board)
    if not moves:
        return 0
    if depth == 0:
        return piece * heuristic(board)
    best = -WIN - 1
    for column in moves:
        row = drop(board, column, piece)
        if wins_at(board, row, column):
            value = WIN - (ply + 1)
        else:
            value = -negamax(board, depth - 1, -beta, -alpha, -piece, ply + 1)
        board[row, column] = 0
        if value > best:
            best = value
            if value > alpha:
                alpha = value
                if alpha >= beta:
                    break
    return best


def search_root(board: Board, depth: int) -> tuple[int, list[int]]:
    """The value for the ``+1`` player (to move) of ``board`` searched ``depth`` >= 1 plies,
    and every move with that value (centre-first order): exact among the best (module
    docstring). ``board`` is left as it was."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    moves = legal_moves(board)
    if not moves:
        raise ValueError("the board is full: no move to search")
    work = board.copy()
    best: int = -WIN - 1
    tied: list[int] = []
    for column in moves:
        row = drop(work, column, 1)
        if wins_at(work, row, column):
            value = WIN - 1
        else:
            lower = best - 1 if tied else -WIN - 1
            value = -negamax(work, depth - 1, -(WIN + 1), -lower, -1, 1)
        work[row, column] = 0
        if value > best:
            best, tied = value, [column]
        elif value == best:
            tied.append(column)
    return best, tied


class AlphaBetaPlayer:
    """A connect-four player searching ``depth`` plies with alpha-beta (module docstring).

    Args:
        depth: plies searched (moves, its own and the replies), >= 1; 4 by default.
        rng: picks among the equal-best moves (seeded by the caller); None: the first of them
            in centre-first order.
    """

    def __init__(self, depth: int = 4, rng: np.random.Generator | None = None) -> None:
        """Keep the depth and the generator."""
        if int(depth) < 1:
            raise ValueError(f"AlphaBetaPlayer: depth must be >= 1, got {depth}")
        self.depth, self.rng = int(depth), rng

    def move(self, board: Board) -> int:
        """The column to play on ``board`` (+1 to move)."""
        _, tied = search_root(board, self.depth)
        if self.rng is None or len(tied) == 1:
            return tied[0]
        return int(self.rng.choice(tied))

    def __call__(self, games: Sequence[Any]) -> list[int]:
        """Moves for games at their mover's turn: anything with ``.position.obs``, the mover's
        flat observation (`rlflow.algorithms.alpha_zero.game.TurnGame`)."""
        return [self.move(board_from_obs(g.position.obs)) for g in games]
