"""A recurrent model over a batch's sequences: how a policy with memory learns.

Rows are cut into sequences by the sampler (`SEQ_START`: every episode fragment starts one, and
each ``max_seq_len`` rows of it another); each sequence starts from the state the sampler stored
with its first row (``state_in_0``, ``state_in_1``, ...), the sequences are padded to one length,
and the outputs at the padding are dropped before any loss sees them: a loss gets one output per
row, as from a feed-forward model. The model is any recurrent one (`rlflow.models.recurrent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from rlflow.data.sample_batch import PREV_ACTIONS, PREV_REWARDS, SEQ_START
from rlflow.errors import ConfigError
from rlflow.models.memory import state_in_key

__all__ = ["sequence_bounds", "sequence_outputs"]


def sequence_bounds(seq_start: Any, count: int) -> tuple[Any, Any]:
    """``(starts, lengths)`` of the sequences of ``count`` rows marked by ``seq_start`` (a bool
    array or tensor); `ConfigError` unless the first row starts one (a batch cut inside a
    sequence, whose first rows have no stored state to start from)."""
    if count and not bool(seq_start[0]):
        raise ConfigError(
            "a recurrent model's batch must start with a sequence start (column "
            f"{SEQ_START!r}): batches are cut into whole sequences only (minibatches, shards)"
        )
    if isinstance(seq_start, torch.Tensor):
        starts = torch.nonzero(seq_start).reshape(-1)
        ends = torch.cat([starts[1:], torch.tensor([count], device=starts.device)])
        return starts, ends - starts
    starts_np = np.flatnonzero(np.asarray(seq_start))
    return starts_np, np.diff(np.append(starts_np, count))


def sequence_outputs(
    model: nn.Module, tensors: Mapping[str, torch.Tensor], obs_key: str = "obs"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dist_inputs [N, D], value [N])`` of a recurrent ``model`` for the ``N`` rows of a
    batch's ``tensors``: its sequences (`SEQ_START`) padded to the longest, each run from its
    first row's ``state_in_k``, the padding's outputs dropped (module docstring)."""
    obs = tensors[obs_key]
    count = int(obs.shape[0])
    starts, lengths = sequence_bounds(tensors[SEQ_START], count)
    steps = torch.arange(int(lengths.max()) if count else 0, device=obs.device)
    valid = steps[None, :] < lengths[:, None]
    # Padding reads the sequence's first row: any real row does, its outputs are dropped.
    index = torch.where(valid, starts[:, None] + steps[None, :], starts[:, None])
    num_states = sum(1 for key in tensors if key.startswith("state_in_"))
    state = [tensors[state_in_key(k)][starts] for k in range(num_states)]
    prev_actions = tensors[PREV_ACTIONS][index] if PREV_ACTIONS in tensors else None
    prev_rewards = tensors[PREV_REWARDS][index] if PREV_REWARDS in tensors else None
    dist_inputs, values, _ = model(obs[index], state, prev_actions, prev_rewards)
    # Row-major over [sequence, step]: the valid outputs in the batch's own row order.
    return dist_inputs[valid], values[valid]
