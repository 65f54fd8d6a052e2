"""PUCT Monte-Carlo tree search over copies of a game, its leaves evaluated in batches.

Silver et al. (2018), "A general reinforcement learning algorithm that masters chess, shogi and
Go through self-play", Methods. A node is a position (a copy of the game, `TurnGame`); an edge
``(s, a)`` holds a prior ``P``, a visit count ``N`` and a value sum ``W`` from the view of the
player to move at ``s``. A simulation descends by

    a* = argmax_{a legal} Q(s, a) + c_puct * P(s, a) * sqrt(max(1, sum_b N(s, b))) / (1 + N(s, a))

with ``Q = W / N`` (0 for an unvisited edge; ties to the lowest action), until it reaches an edge
without a node: the position after it is made (a copy of the game, the move played) and either
ends the game (its value is the mover's reward, known at once) or waits for the network's
``(priors, value)``. The value ``v`` of the leaf's mover is backed up along the path, ``+v`` on
the edges of that player's positions and ``-v`` on the opponent's (two-player zero-sum).

Batching: each round selects up to ``leaves_per_search`` simulations in every tree before any
leaf is evaluated, and the leaves of all trees go to the evaluator in one batch. A simulation in
flight counts on every edge of its path as a visit with a loss of ``virtual_loss`` (``N += 1,
W -= virtual_loss``; undone at its backup), so the next selections of the round take other
paths; one that reaches a leaf still waiting (a collision) is taken back and ends the tree's
round. A tree is made fresh for every move and dropped after it: nothing is kept between moves
or games.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.algorithms.alpha_zero.game import TurnGame

__all__ = [
    "Evaluator",
    "Node",
    "backup",
    "puct_scores",
    "run_search",
    "select_action",
    "visit_policy",
]

Array = npt.NDArray[Any]
Evaluator = Callable[[Array], tuple[Array, Array]]
"""``observations [B, D] -> (priors [B, A] over the legal actions, values [B] in [-1, 1])``."""


class Node:
    """A position in a search tree: the game there, and the statistics of its edges.

    Args:
        game: the game at this position (a copy the node owns).
        num_actions: the size of the action space.
    """

    __slots__ = ("children", "game", "legal", "prior", "value_sum", "visits", "waiting")

    def __init__(self, game: TurnGame, num_actions: int) -> None:
        """A node not yet expanded (no priors)."""
        self.game = game
        self.children: dict[int, Node] = {}
        self.legal: npt.NDArray[np.bool_] | None = None if game.position.over else game.legal()
        self.prior: Array | None = None
        self.visits = np.zeros(num_actions, np.float64)
        self.value_sum = np.zeros(num_actions, np.float64)
        self.waiting = False

    @property
    def player(self) -> str | None:
        """The agent to move here (None: the game is over)."""
        return self.game.position.player

    @property
    def terminal(self) -> bool:
        """Whether the game is over here."""
        return self.game.position.over

    @property
    def expanded(self) -> bool:
        """Whether the node has its priors."""
        return self.prior is not None

    def expand(self, prior: Array) -> None:
        """Set the priors (illegal actions get 0, the rest renormalized)."""
        assert self.legal is not None
        p = np.where(self.legal, np.asarray(prior, np.float64), 0.0)
        total = p.sum()
        self.prior = p / total if total > 0 else self.legal / self.legal.sum()
        self.waiting = False


def puct_scores(node: Node, c_puct: float) -> Array:
    """``Q + U`` of every action at ``node`` (module docstring); illegal actions ``-inf``."""
    assert node.prior is not None and node.legal is not None
    n = node.visits
    q = np.divide(node.value_sum, n, out=np.zeros_like(n), where=n > 0)
    u = c_puct * node.prior * math.sqrt(max(1.0, float(n.sum()))) / (1.0 + n)
    return np.where(node.legal, q + u, -np.inf)


def backup(path: Sequence[tuple[Node, int]], values: dict[str, float], virtual_loss: float) -> None:
    """Add a simulation's outcome to every edge of ``path`` (root first): ``values[player]``
    to the edges of each player's positions, its virtual loss undone (the visit was counted
    when the simulation passed)."""
    for node, action in path:
        assert node.player is not None
        node.value_sum[action] += values[node.player] + virtual_loss


def _leaf_values(leaf: Node, value: float, players: Sequence[str]) -> dict[str, float]:
    """``value`` of the leaf's mover as each player's value (zero-sum)."""
    mover = leaf.player
    return {p: (value if p == mover else -value) for p in players}


def _descend(root: Node, c_puct: float, virtual_loss: float) -> tuple[str, Node, list[Any]]:
    """One selection from ``root``: ``("terminal", leaf, path)``, ``("eval", leaf, path)`` (a
    new leaf, waiting) or ``("collision", leaf, [])`` (taken back)."""
    node, path = root, []
    while True:
        action = int(np.argmax(puct_scores(node, c_puct)))
        node.visits[action] += 1
        node.value_sum[action] -= virtual_loss
        path.append((node, action))
        child = node.children.get(action)
        if child is None:
            child = Node(node.game.play(action), len(node.visits))
            node.children[action] = child
            if child.terminal:
                return "terminal", child, path
            child.waiting = True
            return "eval", child, path
        if child.terminal:
            return "terminal", child, path
        if child.waiting:
            for n, a in path:
                n.visits[a] -= 1
                n.value_sum[a] += virtual_loss
            return "collision", child, []
        node = child


def run_search(
    roots: Sequence[Node],
    evaluate: Evaluator,
    *,
    num_simulations: int,
    c_puct: float,
    virtual_loss: float = 1.0,
    leaves_per_search: int = 1,
    noise: tuple[float, float] | None = None,
    rng: np.random.Generator | None = None,
) -> int:
    """Search every tree of ``roots`` (positions whose game is not over) for
    ``num_simulations`` simulations each, batching the leaves of all trees (module docstring).

    Args:
        roots: the trees' roots; unexpanded ones are evaluated first (one batch).
        evaluate: the network (`Evaluator`).
        num_simulations: simulations per tree (a terminal visit counts as one).
        c_puct: the exploration constant.
        virtual_loss: the loss a simulation in flight counts on its path.
        leaves_per_search: simulations selected per tree before a batch is evaluated.
        noise: ``(dirichlet_alpha, dirichlet_epsilon)``: Dirichlet noise mixed into each root's
            priors over its legal actions (self-play), drawn with ``rng``; None: none.
        rng: the noise's generator.

    Returns:
        The number of batches evaluated (root batch included).
    """
    players = _players(roots)
    fresh = [r for r in roots if not r.expanded]
    batches = 0
    if fresh:
        priors, _ = evaluate(np.stack([r.game.position.obs for r in fresh]))  # type: ignore[misc]
        for root, prior in zip(fresh, priors, strict=True):
            root.expand(prior)
        batches += 1
    if noise is not None and noise[1] > 0:
        gen = rng if rng is not None else np.random.default_rng()
        for root in roots:
            _add_noise(root, noise[0], noise[1], gen)
    done = [0] * len(roots)
    while any(d < num_simulations for d in done):
        waiting = _select_round(
            roots, done, num_simulations, c_puct, virtual_loss, leaves_per_search
        )
        if waiting:
            obs = np.stack([leaf.game.position.obs for _, leaf, _ in waiting])  # type: ignore[misc]
            priors, values = evaluate(obs)
            batches += 1
            for (i, leaf, path), prior, value in zip(waiting, priors, values, strict=True):
                leaf.expand(prior)
                backup(path, _leaf_values(leaf, float(value), players), virtual_loss)
                done[i] += 1
    return batches


def _select_round(
    roots: Sequence[Node],
    done: list[int],
    num_simulations: int,
    c_puct: float,
    virtual_loss: float,
    leaves_per_search: int,
) -> list[tuple[int, Node, list[Any]]]:
    """One round's selections in every tree: terminal visits backed up (counted in ``done``)
    at once, the new leaves returned with their tree's index and path."""
    waiting: list[tuple[int, Node, list[Any]]] = []
    for i, root in enumerate(roots):
        for _ in range(min(leaves_per_search, num_simulations - done[i])):
            kind, leaf, path = _descend(root, c_puct, virtual_loss)
            if kind == "collision":
                break
            if kind == "terminal":
                backup(path, leaf.game.position.rewards, virtual_loss)
                done[i] += 1
            else:
                waiting.append((i, leaf, path))
    return waiting


def _players(roots: Sequence[Node]) -> list[str]:
    env = roots[0].game.env if roots else None
    return list(getattr(env, "possible_agents", []))


def _add_noise(root: Node, alpha: float, epsilon: float, rng: np.random.Generator) -> None:
    assert root.prior is not None and root.legal is not None
    legal = np.flatnonzero(root.legal)
    noise = rng.dirichlet([alpha] * len(legal))
    root.prior[legal] = (1 - epsilon) * root.prior[legal] + epsilon * noise


def visit_policy(root: Node) -> Array:
    """The search's policy at ``root``: visit counts normalized (the policy target)."""
    policy: Array = (root.visits / root.visits.sum()).astype(np.float32)
    return policy


def select_action(root: Node, *, explore: bool, rng: np.random.Generator) -> int:
    """The move after a search: drawn in proportion to the root's visit counts (``explore``,
    the temperature-1 moves), else the most visited (ties to the lowest action)."""
    if explore:
        return int(rng.choice(len(root.visits), p=root.visits / root.visits.sum()))
    return int(np.argmax(root.visits))
