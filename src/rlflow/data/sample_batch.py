"""Columnar batches of experience: `SampleBatch` and `MultiAgentBatch`.

A `SampleBatch` is a dict of numpy arrays (one per column) that all have the same length along
axis 0; row ``i`` of every column belongs to the same environment step. A `MultiAgentBatch` maps
policy ids to `SampleBatch` es and records how many environment steps produced them. Single-agent
experience is the special case of one policy named `DEFAULT_POLICY_ID`.

Column names are the constants below; use them instead of string literals.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from rlflow.checks import check_int
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.errors import ConfigError

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]
"""A numpy array of any dtype and shape: the type of one column."""

OBS = "obs"
"""Observation seen before the action, shape ``(count, *obs_shape)``."""
NEXT_OBS = "next_obs"
"""Observation after the action (the true last one when the episode ended)."""
ACTIONS = "actions"
"""Action taken, shape ``(count, *action_shape)``."""
REWARDS = "rewards"
"""Reward received for the action, shape ``(count,)``."""
TERMINATEDS = "terminateds"
"""True where the episode reached a terminal state (no bootstrap past it)."""
TRUNCATEDS = "truncateds"
"""True where the episode was cut off (time limit); the value past it is still bootstrapped."""
LOGP = "logp"
"""Log-probability of the action under the behaviour policy."""
VF_PREDS = "vf_preds"
"""Value-function prediction V(obs) made when acting."""
ADVANTAGES = "advantages"
"""Advantage estimates, written by `rlflow.returns.compute_advantages`."""
VALUE_TARGETS = "value_targets"
"""Targets for the value function, written by `rlflow.returns.compute_advantages`."""
EPS_ID = "eps_id"
"""Episode id, unique per episode within a run; consecutive rows of one episode share it."""
ENV_ID = "env_id"
"""Index of the sub-environment (in a vector env) that produced the row."""
T = "t"
"""Time step of the row within its episode, starting at 0."""
ACTION_DIST_INPUTS = "action_dist_inputs"
"""Inputs of the action distribution (logits, or mean and log-std) when acting."""

AGENT_INDEX = "agent_index"
"""Index of the agent (in the env's ``possible_agents``) that produced the row (multi-agent)."""
SEQ_START = "seq_start"
"""Column of a sequence batch (bool): the row starts a sequence (a model with memory starts
from its ``state_in_k`` columns: `rlflow.models.recurrent`); see `rlflow.data.sequences`."""
PREV_ACTIONS = "prev_actions"
"""Column of a batch of a recurrent policy: the action taken before the row's (zeros at an
episode's first row)."""
PREV_REWARDS = "prev_rewards"
"""Column of a batch of a recurrent policy: the reward received before the row (0 at an
episode's first row)."""
SEQ_STEPS = "seq_steps"
"""Column of a batch of folded sequences (one row per sequence, per-step columns ``[L + 1,
...]``: `rlflow.data.sequences.fold_sequences`): the sequence's number of steps, what
`SampleBatch.env_steps` counts."""
SEQ_TERMINATED = "seq_terminated"
"""Column of a batch of folded sequences: whether the sequence's last step ended the episode
(nothing to bootstrap from after it)."""
BOOTSTRAP = "bootstrap"
"""True on the row that closes a sequence of a sequence batch (policies with
``requires_bootstrap_rows``: V-trace, R2D2; see `rlflow.data.sequences`): its OBS is the
observation after the sequence's last step, its other columns are zeros, and it is not an env
step (`SampleBatch.env_steps` leaves it out)."""
NUM_GRAD_UPDATES = "num_grad_updates"
"""The acting policy's ``num_grad_updates`` (learner updates in the weights it sampled with),
int64; the learner's count when it trains on the row minus this is the row's policy lag."""

# Replay columns: defined here, below the replay buffers and the policies that read them.
DISCOUNTS = "discounts"
"""Column added by `rlflow.replay.n_step_transitions`: gamma^m, the discount of the bootstrap
value."""
BATCH_INDEXES = "batch_indexes"
"""Column added by `ReplayBuffer.sample`: the ring slot of each row (int64), for
`PrioritizedReplayBuffer.update_priorities`."""
WEIGHTS = "weights"
"""Column added by `PrioritizedReplayBuffer.sample`: importance weights in (0, 1] (float32)."""
TD_ERROR = "td_error"
"""Per-row TD errors (an array) in a replay policy's learner stats; UpdateReplayPriorities
takes them out (with the batch's ``batch_indexes``) before the stats reach the results."""


def _as_column(name: str, value: npt.ArrayLike) -> Array:
    """Convert one column to a numpy array with at least one dimension."""
    array = np.asarray(value)
    if array.ndim == 0:
        raise ConfigError(
            f"SampleBatch column {name!r} is a scalar ({array!r}); every column needs a "
            "leading batch axis, e.g. pass [value] instead of value"
        )
    return array


class SampleBatch(dict[str, Array]):
    """A columnar batch: column name -> numpy array, all with the same length along axis 0.

    Columns are converted with `numpy.asarray` (no copy when already an array). Mismatched
    lengths raise `ConfigError` naming the column, at construction and on item assignment.
    Methods never modify the batch in place; they return new batches (`slice` returns views that
    share memory with this batch, every other method returns fresh arrays).

    Example:
        >>> b = SampleBatch({REWARDS: [1.0, 2.0, 3.0], ACTIONS: [0, 1, 0]})
        >>> b.count
        3
        >>> b.slice(1, 3)[REWARDS].tolist()
        [2.0, 3.0]
    """

    def __init__(
        self,
        columns: Mapping[str, npt.ArrayLike] | None = None,
        /,
        **kwargs: npt.ArrayLike,
    ) -> None:
        """Build a batch from a mapping of columns and/or keyword columns."""
        super().__init__()
        items = dict(columns or {})
        items.update(kwargs)
        for name, value in items.items():
            self[name] = value

    def __setitem__(self, name: str, value: npt.ArrayLike) -> None:
        """Set a column, checking that its length matches the other columns."""
        array = _as_column(name, value)
        for other, column in self.items():
            if other != name and len(column) != len(array):
                raise ConfigError(
                    f"SampleBatch column {name!r} has length {len(array)} but column {other!r} "
                    f"has length {len(column)}; all columns must have the same length"
                )
        super().__setitem__(name, array)

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Set several columns, each checked as by item assignment."""
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def __repr__(self) -> str:
        """Show the row count and the columns with their shapes and dtypes."""
        cols = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self.items())
        return f"SampleBatch(count={self.count}, {{{cols}}})"

    @property
    def count(self) -> int:
        """Number of rows (0 for a batch without columns)."""
        for column in self.values():
            return int(column.shape[0])
        return 0

    def env_steps(self) -> int:
        """Number of environment steps in the batch: `count` less the `BOOTSTRAP` rows of a
        sequence batch (which are no steps); for a batch of folded sequences (one row each,
        `rlflow.data.sequences.fold_sequences`), the sum of their `SEQ_STEPS`."""
        folded = self.get(SEQ_STEPS)
        if folded is not None:
            return int(np.sum(folded))
        flags = self.get(BOOTSTRAP)
        return self.count if flags is None else self.count - int(np.count_nonzero(flags))

    def agent_steps(self) -> int:
        """Number of agent steps in the batch (equal to `env_steps`)."""
        return self.env_steps()

    def size_bytes(self) -> int:
        """Total size of the column data in bytes."""
        return sum(int(column.nbytes) for column in self.values())

    def copy(self) -> SampleBatch:
        """Return a deep copy: new arrays, nothing shared with this batch."""
        return SampleBatch({k: v.copy() for k, v in self.items()})

    @overload
    @staticmethod
    def concat_samples(batches: Sequence[SampleBatch]) -> SampleBatch: ...

    @overload
    @staticmethod
    def concat_samples(
        batches: Sequence[SampleBatch | MultiAgentBatch],
    ) -> SampleBatch | MultiAgentBatch: ...

    @staticmethod
    def concat_samples(
        batches: Sequence[SampleBatch | MultiAgentBatch],
    ) -> SampleBatch | MultiAgentBatch:
        """Concatenate batches row-wise, in the order given.

        A list of `SampleBatch` gives a `SampleBatch`; if any element is a `MultiAgentBatch`,
        every `SampleBatch` is treated as `DEFAULT_POLICY_ID` experience and the result is a
        `MultiAgentBatch` (see `MultiAgentBatch.concat_samples`). Batches with zero rows are
        skipped (if all have zero rows, the result has the first one's columns); an empty list
        gives an empty `SampleBatch`. Non-empty batches must have the same
        columns, else `ConfigError`.
        """
        if any(isinstance(b, MultiAgentBatch) for b in batches):
            return MultiAgentBatch.concat_samples(batches)
        return _concat_sample_batches([b for b in batches if isinstance(b, SampleBatch)])

    def concat(self, other: SampleBatch) -> SampleBatch:
        """Return the rows of this batch followed by the rows of ``other``."""
        return _concat_sample_batches([self, other])

    def slice(self, start: int, end: int) -> SampleBatch:
        """Return rows ``start:end`` (Python slice rules) as views sharing this batch's memory."""
        return SampleBatch({k: v[start:end] for k, v in self.items()})

    def shuffle(self, rng: np.random.Generator) -> SampleBatch:
        """Return a new batch with the rows permuted by ``rng`` (same permutation per column)."""
        perm = rng.permutation(self.count)
        return SampleBatch({k: v[perm] for k, v in self.items()})

    def minibatches(
        self, size: int, rng: np.random.Generator | None = None
    ) -> Iterator[SampleBatch]:
        """Iterate over minibatches of exactly ``size`` rows.

        With ``rng`` the rows are shuffled once first, otherwise they keep their order. Only
        full minibatches are yielded: the last ``count % size`` rows are dropped. If
        ``size >= count`` the whole (possibly shuffled) batch is yielded once; an empty batch
        yields nothing. ``size`` is validated when this is called, not on the first item.
        """
        size = check_int(size, "SampleBatch.minibatches: size", low=1)
        source = self.shuffle(rng) if rng is not None else self
        return _iter_minibatches(source, size)

    def split_by_episode(self) -> list[SampleBatch]:
        """Split into runs of consecutive rows with equal `EPS_ID`, in row order.

        An episode id that occurs in two separate runs gives two batches. Raises `ConfigError`
        when the batch has rows but no `EPS_ID` column.
        """
        if self.count == 0:
            return []
        if EPS_ID not in self:
            raise ConfigError(
                f"SampleBatch.split_by_episode needs the {EPS_ID!r} column; columns are "
                f"{sorted(self)}"
            )
        eps = self[EPS_ID]
        starts = [0, *(np.flatnonzero(eps[1:] != eps[:-1]) + 1).tolist(), self.count]
        return [self.slice(a, b).copy() for a, b in itertools.pairwise(starts)]

    def as_multi_agent(self) -> MultiAgentBatch:
        """Wrap as a `MultiAgentBatch` with this batch as `DEFAULT_POLICY_ID`'s experience."""
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.env_steps())


def _iter_minibatches(batch: SampleBatch, size: int) -> Iterator[SampleBatch]:
    """Yield consecutive full minibatches of ``batch`` (see `SampleBatch.minibatches`)."""
    if batch.count == 0:
        return
    if size >= batch.count:
        yield batch
        return
    for start in range(0, batch.count - size + 1, size):
        yield batch.slice(start, start + size)


def _concat_sample_batches(batches: Iterable[SampleBatch]) -> SampleBatch:
    """Concatenate `SampleBatch` es with equal columns; zero-row batches are skipped."""
    batches = list(batches)
    non_empty = [b for b in batches if b.count > 0]
    if not non_empty:
        # Keep the columns (with zero rows) of the first batch that has any.
        return next((b.copy() for b in batches if b), SampleBatch())
    columns = set(non_empty[0])
    for i, b in enumerate(non_empty[1:], start=1):
        if set(b) != columns:
            raise ConfigError(
                f"SampleBatch.concat_samples: batch {i} has columns {sorted(b)} but batch 0 has "
                f"{sorted(columns)}; every non-empty batch needs the same columns"
            )
    return SampleBatch({k: np.concatenate([b[k] for b in non_empty]) for k in non_empty[0]})


class MultiAgentBatch:
    """Experience of several policies: policy id -> `SampleBatch`, plus the env-step count.

    ``env_steps_count`` counts environment steps (one step of a multi-agent env may give rows
    to several policies); `agent_steps` counts rows over all policies. `count` is the env-step
    count, the unit of `train_batch_size` and `rollout_fragment_length`.
    """

    __slots__ = ("env_steps_count", "policy_batches")

    def __init__(self, policy_batches: Mapping[str, SampleBatch], env_steps_count: int) -> None:
        """Hold ``policy_batches`` (copied into a new dict, batches not copied)."""
        check_int(env_steps_count, "MultiAgentBatch: env_steps_count", low=0)
        for pid, batch in policy_batches.items():
            if not isinstance(batch, SampleBatch):
                raise ConfigError(
                    f"MultiAgentBatch: policy {pid!r} maps to {type(batch).__name__}; "
                    "every value must be a SampleBatch"
                )
        self.policy_batches: dict[str, SampleBatch] = dict(policy_batches)
        self.env_steps_count: int = int(env_steps_count)

    def __repr__(self) -> str:
        """Show the env-step count and each policy's row count."""
        counts = {pid: b.count for pid, b in self.policy_batches.items()}
        return f"MultiAgentBatch(env_steps={self.env_steps_count}, policy_counts={counts})"

    @property
    def count(self) -> int:
        """Number of environment steps (equal to `env_steps`)."""
        return self.env_steps_count

    def env_steps(self) -> int:
        """Number of environment steps that produced this experience."""
        return self.env_steps_count

    def agent_steps(self) -> int:
        """Number of agent steps summed over all policies (their rows, less bootstrap rows)."""
        return sum(b.agent_steps() for b in self.policy_batches.values())

    def size_bytes(self) -> int:
        """Total size of the column data of all policies in bytes."""
        return sum(b.size_bytes() for b in self.policy_batches.values())

    def copy(self) -> MultiAgentBatch:
        """Return a deep copy: every policy batch copied."""
        return MultiAgentBatch(
            {pid: b.copy() for pid, b in self.policy_batches.items()},
            self.env_steps_count,
        )

    def select(self, policy_ids: Iterable[str]) -> MultiAgentBatch:
        """Return the experience of ``policy_ids`` only (batches shared, env steps kept)."""
        ids = list(policy_ids)
        unknown = [pid for pid in ids if pid not in self.policy_batches]
        if unknown:
            raise ConfigError(
                f"MultiAgentBatch.select: unknown policy ids {unknown}; the batch has "
                f"{sorted(self.policy_batches)}"
            )
        return MultiAgentBatch({pid: self.policy_batches[pid] for pid in ids}, self.count)

    def as_multi_agent(self) -> MultiAgentBatch:
        """Return self (already multi-agent)."""
        return self

    @staticmethod
    def concat_samples(
        batches: Sequence[SampleBatch | MultiAgentBatch],
    ) -> MultiAgentBatch:
        """Concatenate per policy, in the order given; env-step counts add up.

        A `SampleBatch` in the list counts as `DEFAULT_POLICY_ID` experience. A policy missing
        from some batches gets only the rows of the batches that have it.
        """
        per_policy: dict[str, list[SampleBatch]] = {}
        env_steps = 0
        for batch in batches:
            ma = batch.as_multi_agent()
            env_steps += ma.env_steps_count
            for pid, b in ma.policy_batches.items():
                per_policy.setdefault(pid, []).append(b)
        return MultiAgentBatch(
            {pid: _concat_sample_batches(bs) for pid, bs in per_policy.items()},
            env_steps,
        )


def to_multi_agent(batch: SampleBatch | MultiAgentBatch) -> MultiAgentBatch:
    """Return ``batch`` as a `MultiAgentBatch` (a `SampleBatch` becomes `DEFAULT_POLICY_ID`'s)."""
    return batch.as_multi_agent()


def from_multi_agent_if_single(
    batch: SampleBatch | MultiAgentBatch,
) -> SampleBatch | MultiAgentBatch:
    """Unwrap a `MultiAgentBatch` holding only `DEFAULT_POLICY_ID`; return anything else as is."""
    if isinstance(batch, MultiAgentBatch) and list(batch.policy_batches) == [DEFAULT_POLICY_ID]:
        return batch.policy_batches[DEFAULT_POLICY_ID]
    return batch
