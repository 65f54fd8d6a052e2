"""What a policy with memory carries between steps, as the samplers and the batches see it.

A recurrent model's state travels as arrays: the samplers keep it per sub-env and pass it back
with the previous action and reward (`RecurrentInputs`), and a batch stores the state at each
row in the columns `state_in_key` names. The policy's step returns the next state under the
keys `state_out_key` names. The recurrent models are `rlflow.models.recurrent`; nothing here
needs torch, so the rollout workers' modules import without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["RecurrentInputs", "state_in_key", "state_out_key"]


class RecurrentInputs(NamedTuple):
    """What a policy with memory acts from, besides the observations (`TorchPolicy.
    compute_actions` and ``value`` take it as ``memory``), one row per observation."""

    state: Sequence[Any] | None = None
    """The model's state tensors as arrays, as `TorchPolicy.initial_state` gives them (None:
    the initial state)."""
    prev_actions: Any = None
    """The previous actions ``[B, ...]`` (None: not given; read if the model uses them)."""
    prev_rewards: Any = None
    """The previous rewards ``[B]`` (None: not given)."""


def state_in_key(k: int) -> str:
    """The batch column of state tensor ``k`` at a row: ``"state_in_0"``, ``"state_in_1"``..."""
    return f"state_in_{k}"


def state_out_key(k: int) -> str:
    """The key of state tensor ``k`` after a step in what `TorchPolicy.compute_actions`
    returns: ``"state_out_0"``, ``"state_out_1"``..."""
    return f"state_out_{k}"
