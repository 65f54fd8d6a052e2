"""`AlphaZeroConfig`: the search's, the self-play's and the learner's settings.

Names follow RLlib's contributed ``AlphaZero`` where the meaning is the same (``num_simulations``,
``dirichlet_epsilon``, ``num_sgd_iter``, ``sgd_minibatch_size``); the paper's symbols where RLlib
had none (``c_puct``, ``dirichlet_alpha``). Defaults: the paper's search constants scaled to small
board games on a 2-core machine; the tuned files set a game's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlflow.checks import check_choice
from rlflow.config import AlgorithmConfig
from rlflow.config.learning import ReplayCapacityConfig, SGDConfig
from rlflow.config.model import ModelConfig

__all__ = ["EVALUATORS", "AlphaZeroConfig"]

EVALUATORS = ("local", "shared")
"""Where a worker's searches evaluate their leaves (`AlphaZeroConfig.evaluator`)."""


@dataclass(frozen=True, kw_only=True)
class AlphaZeroConfig(
    AlgorithmConfig,
    SGDConfig,
    ReplayCapacityConfig,
    defaults={
        "num_sgd_iter": 10,
        "sgd_minibatch_size": 128,
        "env": "pettingzoo.classic.tictactoe_v3",
        "num_workers": 1,
        "lr": 1e-3,
        "model": ModelConfig(hidden=(64, 64), activation="relu"),
        "min_time_s_per_iteration": 0.0,
    },
):
    """AlphaZero (Silver et al. 2018): self-play games played by PUCT tree search over copies of
    the game, a network's policy and value trained on the searches' visit counts and the games'
    outcomes.

    Each iteration every rollout worker (the local one with ``num_workers=0``) plays
    ``games_per_worker`` games at once, every move chosen by a search of ``num_simulations``
    simulations whose leaves are evaluated in batches across the worker's games; the positions
    go to a replay of the last ``replay_capacity`` positions and the learner takes
    ``num_sgd_iter`` minibatches of ``sgd_minibatch_size`` (>= 1) positions drawn from it
    (here ``num_sgd_iter`` counts minibatches, not epochs). The env must be a
    two-player, turn-based, zero-sum game with action masks whose state can be copied
    (`rlflow.algorithms.alpha_zero.game`). ``train_batch_size``, ``rollout_fragment_length``,
    ``num_envs_per_worker`` and ``gamma`` are not used: games run to their end.
    """

    num_simulations: int = 50
    """Simulations (leaf evaluations or terminal visits) per search, i.e. per move, >= 1."""
    c_puct: float = 1.5
    """The exploration constant of PUCT: ``Q + c_puct * P * sqrt(N_parent) / (1 + N)``, > 0."""
    dirichlet_alpha: float = 0.3
    """Concentration of the Dirichlet noise mixed into the root's priors in self-play, > 0 (the
    paper: 0.3 for chess, 0.03 for Go; about 10 / legal moves)."""
    dirichlet_epsilon: float = 0.25
    """Weight of that noise, in [0, 1] (0: none)."""
    temperature_moves: int = 4
    """Moves of each game, counted from its start, whose action is drawn with
    probability proportional to the root's visit counts (exploration); later moves take the
    most visited action, >= 0."""
    virtual_loss: float = 1.0
    """Virtual loss, >= 0: a simulation in flight counts as that many lost visits on its path,
    so the next selections of the same batch spread over other leaves."""
    leaves_per_search: int = 4
    """Simulations of one tree selected before their leaves are evaluated together (with the
    other games' of the worker), >= 1: more is larger batches and a wider, less exact search."""
    games_per_worker: int = 8
    """Games each worker plays at once per iteration, their searches' leaves batched, >= 1."""
    evaluator: str = "local"
    """Where leaves are evaluated: ``"local"`` (each worker's own copy of the network) or
    ``"shared"`` (one inference actor for all workers, which batches what they send: the nested
    dataflow; it gets the learner's weights every iteration)."""
    l2_regularization: float = 1e-4
    """Weight of the L2 penalty on the network's weights in the loss, >= 0."""
    evaluation_games: int = 0
    """Games against a uniformly random legal player after each iteration, every move of the
    learner searched (``num_simulations``, no noise, the most visited move), its seat taking
    turns; reported as ``alpha_zero/vs_random`` (win, draw and loss rates, by seat too), >= 0
    (0: none). The trainer's own ``evaluation_interval`` plays the network without search."""
    value_loss_coeff: float = 1.0
    """Weight of the value's squared error in the loss (the policy's cross-entropy has 1), >= 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("num_simulations", 1)
        self._check_positive("c_puct")
        self._check_positive("dirichlet_alpha")
        self._check_range("dirichlet_epsilon", 0.0, 1.0)
        self._check_int("temperature_moves", 0)
        self._check_range("virtual_loss", 0.0, float("inf"))
        self._check_int("leaves_per_search", 1)
        self._check_int("games_per_worker", 1)
        check_choice(self.evaluator, self._label("evaluator"), EVALUATORS)
        self._check_int("sgd_minibatch_size", 1)
        self._check_range("l2_regularization", 0.0, float("inf"))
        self._check_range("value_loss_coeff", 0.0, float("inf"))
        self._check_int("evaluation_games", 0)
        if self.observation_filter != "NoFilter":
            raise self._bad(
                "observation_filter",
                "must be 'NoFilter': the search feeds the network the game's own observations "
                "(a board and its action mask)",
            )
        if self.num_learners:
            raise self._bad("num_learners", "must be 0: AlphaZero trains on the driver")
        if self.self_play is not None:
            raise self._bad(
                "self_play",
                "must be None: AlphaZero plays itself, both seats searched with the same network",
            )
        if self.elastic():
            raise self._bad(
                "min_workers",
                f"must be None or num_workers={self.num_workers}: AlphaZero's rounds play games "
                "on every remote worker and end on a dead one, so the run cannot grow or shrink",
            )
        if self.evaluator == "shared" and self.num_workers < 1:
            raise self._bad("evaluator", "'shared' needs num_workers >= 1 (remote workers)")
