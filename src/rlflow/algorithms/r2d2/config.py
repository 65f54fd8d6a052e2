"""`R2D2Config`: DQN's settings plus recurrent replay (RLlib's names where they exist).

The Q network is the built-in recurrent one (`rlflow.models.recurrent`: ``hidden``, tanh, then
an LSTM cell of ``lstm_cell_size`` units, or a GRU one with ``model.use_gru``; the rule in
`R2D2Config`). Experience is replayed as sequences of ``replay_sequence_length`` steps, each
started from the recurrent state the worker had at its first step; the first ``burn_in`` steps
only warm the state up (no loss, no gradient). Targets are n-step double-Q within a sequence,
through R2D2's value rescaling ``h`` when ``use_h_function``; a sequence's priority is
``priority_eta * max |TD| + (1 - priority_eta) * mean |TD|`` of its trained steps.
``train_batch_size``, ``buffer_size`` and ``learning_starts`` count env steps, as DQN's do (a
replayed batch is ``train_batch_size // replay_sequence_length`` sequences).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.algorithms.q_learning.config import SequenceReplayConfig
from rlflow.config.model import ModelConfig

__all__ = ["R2D2Config"]


@dataclass(frozen=True, kw_only=True)
class R2D2Config(
    DQNConfig,
    SequenceReplayConfig,
    defaults={
        "train_batch_size": 640,
        "rollout_fragment_length": 20,
        "target_network_update_freq": 2500,
        "model": ModelConfig(activation="tanh"),
    },
):
    """R2D2: DQN with a recurrent Q network learning on replayed sequences.

    The Q network has memory: a ``model`` with neither ``use_lstm`` nor ``use_gru`` gets
    ``use_lstm`` (so ``model: {use_gru: true}`` picks a GRU); a ``custom_model`` is left as it
    is, for the policy to refuse.
    """

    burn_in: int = 0
    """Leading steps of each replayed sequence that only warm up the recurrent state, in
    [0, replay_sequence_length)."""
    use_h_function: bool = True
    """Train on ``h(target)`` with R2D2's invertible value rescaling ``h(x) = sign(x)
    (sqrt(|x| + 1) - 1) + eps x``."""
    h_function_epsilon: float = 1e-3
    """The ``eps`` of ``h``, > 0."""
    priority_eta: float = 0.9
    """Weight of a sequence's largest |TD error| in its priority, in [0, 1] (R2D2's eta)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        model = self.model
        if not (model.use_lstm or model.use_gru or model.custom_model is not None):
            recurrent = dataclasses.replace(model, use_lstm=True, where=self._label("model"))
            object.__setattr__(self, "model", recurrent)
        self._check_int("burn_in", 0)
        if self.burn_in >= self.replay_sequence_length:
            raise self._bad(
                "burn_in",
                f"must be < replay_sequence_length={self.replay_sequence_length} (a sequence "
                "needs steps to learn on after its burn-in)",
            )
        if self.train_batch_size < self.replay_sequence_length:
            raise self._bad(
                "train_batch_size",
                f"must be >= replay_sequence_length={self.replay_sequence_length} (env steps "
                "of whole sequences per replayed batch)",
            )
        self._check_positive("h_function_epsilon")
        self._check_range("priority_eta", 0.0, 1.0)
        if self.worker_side_prioritization:
            raise self._bad("worker_side_prioritization", "is not supported by R2D2 (set false)")
