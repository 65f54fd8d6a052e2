"""`PolicyUpdate`: how a policy learns, an object the policy holds (``policy.update``).

A `rlflow.policy.TorchPolicy` keeps its model, acting, its loss, its weights and state; the
update it holds owns everything a learning step needs besides the loss:

- the optimizer (`rlflow.learner.adam.Adam` over the parameter groups the policy gives, built
  on the first step: rollout workers never step) and the learning rate, which follows
  ``lr_schedule`` on the global ``timestep`` (:meth:`PolicyUpdate.on_global_vars`);
- the way of a batch to the policy's device (:meth:`PolicyUpdate.batch_to_tensors`: the numeric
  columns, and a sequence batch's layout, `rlflow.data.sequences`; to an accelerator in one copy
  through `rlflow.learner.staging.HostStaging`, ahead of time with :meth:`PolicyUpdate.stage`);
- data parallelism (:attr:`PolicyUpdate.data_parallel`, set by a learner actor: each step learns
  on this learner's shard and averages gradients and loss with the others; or, set by a DD-PPO
  rollout worker, on its own batch: `rlflow.learner.data_parallel`);
- the non-finite guard and the counters: a step whose loss or gradient norm is NaN or infinite
  is skipped (:meth:`PolicyUpdate.apply_update`), ``max_nonfinite_updates`` in a row raise
  `NonFiniteError`; :attr:`PolicyUpdate.num_grad_updates` counts the steps taken.

It exposes one step on a batch (:meth:`PolicyUpdate.learn_on_batch`), epochs of minibatches
(:meth:`PolicyUpdate.learn_on_minibatches`), gradients and their application
(:meth:`PolicyUpdate.compute_gradients`, :meth:`PolicyUpdate.apply_gradients`), a step on a
loss the policy computed itself (:meth:`PolicyUpdate.minimize`: MAML's meta-objective) and its
state. Minibatches and shards are cut from one kind of unit: a row, or, in a sequence batch, a
whole sequence (`rlflow.data.sequences.SequenceLayout`); the batch says which, no policy does.
A policy class chooses its parameter groups and whether a parameter its loss does not reach is
left alone in a step by its `make_update` hook (twin-Q: three groups, TD3's actor left alone
between delayed updates).

Policy lag: :attr:`PolicyUpdate.num_grad_updates` counts the optimizer steps a policy's weights
went through (on the learner; a worker's copy is told the learner's count with the weights).
Sampled rows carry it (column ``NUM_GRAD_UPDATES``); every update reports `POLICY_LAG`
(``diff_num_grad_updates_vs_sampler_policy``, RLlib's name): the learner's count minus the
rows' mean, how many updates the training weights are ahead of the sampling weights.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlflow.checks import check_int
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import BATCH_INDEXES, NUM_GRAD_UPDATES, SampleBatch
from rlflow.data.sequences import LAYOUT_KEYS, SequenceLayout, minibatch_groups
from rlflow.errors import ConfigError, NonFiniteError
from rlflow.learner.adam import Adam
from rlflow.learner.data_parallel import DataParallel
from rlflow.learner.staging import HostStaging, StagedBatch
from rlflow.schedules import PiecewiseSchedule

__all__ = ["POLICY_LAG", "Learnable", "PolicyUpdate", "stats_to_host"]

Array = npt.NDArray[Any]
Stats = dict[str, Any]

POLICY_LAG = "diff_num_grad_updates_vs_sampler_policy"
"""Learner stat: updates between the weights that sampled a batch and those training on it."""


class Learnable(Protocol):
    """What a `PolicyUpdate` reads of the policy it updates (`rlflow.policy.TorchPolicy`)."""

    @property
    def config(self) -> AlgorithmConfig:
        """The policy's typed config."""
        ...

    @property
    def device(self) -> torch.device:
        """Where the policy's model learns."""
        ...

    @property
    def policy_id(self) -> str:
        """The policy's id, for messages."""
        ...

    @property
    def requires_bootstrap_rows(self) -> bool:
        """Whether its sequences must be closed by bootstrap rows (V-trace)."""
        ...

    @property
    def recurrent(self) -> bool:
        """Whether its model has memory (it reads a sequence batch's row view)."""
        ...

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Stats]:
        """The scalar loss on a batch's tensors and its stats."""
        ...


class _Units:
    """What a batch's minibatches and shards are cut from: its rows, or its whole sequences."""

    def __init__(self, batch: Mapping[str, Any], *, rows: bool) -> None:
        self.layout = SequenceLayout.of(batch)
        self.rows = rows  # send the layout's row view (a model with memory reads it)
        count = len(next(iter(batch.values()))) if batch else 0
        self.count = count if self.layout is None else self.layout.num_sequences

    @property
    def steps(self) -> npt.NDArray[np.int64]:
        """The env steps of each unit (1 per row)."""
        if self.layout is None:
            return np.ones(self.count, dtype=np.int64)
        return self.layout.steps

    def take(self, which: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], dict[str, Array]]:
        """The rows of units ``which`` (in that order) and the layout of the batch they form
        (`SequenceLayout.columns`; nothing for rows)."""
        if self.layout is None:
            return which, {}
        rows, layout = self.layout.take(which)
        return rows, layout.columns(rows=self.rows)


class PolicyUpdate:
    """A policy's update (module docstring).

    Args:
        policy: the policy it updates: its ``loss``, ``config`` (``lr``, ``lr_schedule``,
            ``grad_clip``, ``max_nonfinite_updates``), ``device`` and ``policy_id``.
        parameters: the trainable parameters, in the order gradients travel
            (:meth:`compute_gradients`).
        param_groups: the optimizer's groups (``{"params": [...], "lr": ...}``; a group without
            ``"lr"`` takes :attr:`lr`); default: one group of ``parameters``.
        skip_unreached: a parameter the loss does not reach in a step keeps no gradient, and
            the optimizer leaves it (and its moments) alone; by default it gets a zero gradient,
            so every step and every gradient list covers all ``parameters``.
    """

    def __init__(
        self,
        policy: Learnable,
        parameters: Sequence[nn.Parameter],
        *,
        param_groups: Sequence[Mapping[str, Any]] | None = None,
        skip_unreached: bool = False,
    ) -> None:
        """Keep the parts; the optimizer is built on the first step."""
        config = policy.config
        self.policy = policy
        self.parameters = list(parameters)
        """The trainable parameters, in gradient order."""
        self.skip_unreached = skip_unreached
        self._param_groups = None if param_groups is None else [dict(g) for g in param_groups]
        self.lr_schedule = (
            None
            if config.lr_schedule is None
            else PiecewiseSchedule.from_points(
                config.lr_schedule, f"{type(config).__name__}.lr_schedule"
            )
        )
        """``config.lr_schedule`` (followed on the global ``timestep``), or None."""
        self.lr: float = config.lr if self.lr_schedule is None else self.lr_schedule.value(0)
        """The learning rate now."""
        self.num_grad_updates = 0
        """Optimizer steps the weights went through (a worker's copy: the learner's count at
        the last weight sync); sampled rows record it in ``NUM_GRAD_UPDATES``."""
        self.num_nonfinite_updates = 0
        """Updates skipped because the loss or the gradient norm was NaN or infinite (their
        step never reached the weights or the optimizer state): :meth:`apply_update`."""
        self.last_update_skipped = False
        """Whether the latest update was skipped (non-finite)."""
        self._nonfinite_streak = 0
        self._last_finite: Stats = {}
        self._optimizer: Adam | None = None
        device = policy.device
        self.staging: HostStaging | None = HostStaging(device) if device.type == "cuda" else None
        """How :meth:`batch_to_tensors` sends a batch to an accelerator: one pinned, reused
        host buffer and one copy; None on CPU, where columns become tensors without a copy."""
        self._copy_stream: Any = None  # the CUDA stream of stage(), made on first use
        self.data_parallel: DataParallel | None = None
        """This learner's place in a group of data-parallel learners (``num_learners``), set by
        the learner actor that holds the policy; None: it learns alone. With one, every step
        learns on this learner's shard and averages gradients and loss with the others."""
        self.shard_span: tuple[int, int, int] | None = None
        """While a data-parallel step computes its loss: ``(start, end, rows)``, this learner's
        rows of the step's ``rows``. A loss that draws noise per row (SAC, TD3) draws it for
        every row of the step and keeps its own (`rlflow.algorithms.twin_q`), so the learners
        use the noise one learner would."""

    @property
    def optimizer(self) -> Adam:
        """Adam over the parameter groups at :attr:`lr`, built on first use."""
        if self._optimizer is None:
            groups = self._param_groups or [{"params": self.parameters}]
            self._optimizer = Adam(groups, lr=self.lr)
        return self._optimizer

    def on_global_vars(self, global_vars: Mapping[str, Any]) -> None:
        """Follow ``lr_schedule`` to the global ``timestep`` (every group's rate)."""
        if self.lr_schedule is not None and "timestep" in global_vars:
            self.lr = self.lr_schedule.value(int(global_vars["timestep"]))
            for group in [] if self._optimizer is None else self._optimizer.param_groups:
                group["lr"] = self.lr

    # -- batches to the device --------------------------------------------------------------

    def _to_device(self, array: Array) -> torch.Tensor:
        array = np.ascontiguousarray(array)
        if not array.flags.writeable:
            # Ray hands out read-only zero-copy arrays; torch needs memory it may write.
            array = array.copy()
        tensor = torch.from_numpy(array)
        device = self.policy.device
        if device.type == "cpu":
            return tensor
        return tensor.pin_memory().to(device, non_blocking=True)

    def tensor_columns(self, batch: Mapping[str, Any]) -> dict[str, Array]:
        """The host arrays :meth:`batch_to_tensors` sends: the numeric columns of ``batch``
        (float64 as float32) but ``NUM_GRAD_UPDATES`` (bookkeeping, never in a loss), and a
        sequence batch's layout (`rlflow.data.sequences.SequenceLayout.columns`)."""
        columns: dict[str, Array] = {}
        for name, column in batch.items():
            array = np.asarray(column)
            if array.dtype.kind not in "biuf" or name == NUM_GRAD_UPDATES:
                continue
            columns[name] = array.astype(np.float32) if array.dtype == np.float64 else array
        layout = SequenceLayout.of(batch)
        if layout is not None:
            if self.policy.requires_bootstrap_rows:
                layout.check_closed(f"{type(self.policy).__name__}")
            columns.update(layout.columns(rows=self.policy.recurrent))
        return columns

    def batch_to_tensors(self, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """:meth:`tensor_columns` of ``batch`` as tensors on the policy's device (uint8
        observations stay uint8 until they are there). To an accelerator they travel together,
        in one copy through :attr:`staging`; a batch staged ahead (:meth:`stage`) gives its
        tensors at once."""
        if isinstance(batch, StagedBatch):
            staged = batch.tensors_for(self, self.policy.device)
            if staged is not None:
                return staged
        columns = self.tensor_columns(batch)
        if self.staging is not None:
            return self.staging.to_device(columns)
        return {name: self._to_device(array) for name, array in columns.items()}

    def stage(self, batch: SampleBatch) -> StagedBatch:
        """``batch`` with its tensors already on their way to the device (on a side CUDA
        stream, so the copy overlaps the training of the batch before it): what the learner
        thread prefetches. On CPU the conversion is just done ahead."""
        device = self.policy.device
        if device.type != "cuda":
            return StagedBatch(batch, self.batch_to_tensors(batch), owner=self)
        if self._copy_stream is None:
            self._copy_stream = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        with torch.cuda.stream(self._copy_stream):
            tensors = self.batch_to_tensors(batch)
            ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
            ready.record(self._copy_stream)
        return StagedBatch(batch, tensors, owner=self, ready=ready)

    # -- learning ---------------------------------------------------------------------------

    def learn_on_batch(self, batch: Mapping[str, Any]) -> Stats:
        """Take one optimizer step on the whole batch; return the loss stats (on the host),
        the policy lag (:meth:`lag_stats`) and, for a replayed batch, its `BATCH_INDEXES`
        (with per-row stats such as TD errors, for priority updates)."""
        lag = self.lag_stats(batch)
        stats = stats_to_host(self._step(batch))
        if self.last_update_skipped:  # per-row values of a skipped update feed nothing
            stats = {k: v for k, v in stats.items() if not isinstance(v, np.ndarray)}
        stats.update(lag)
        if BATCH_INDEXES in batch:
            stats[BATCH_INDEXES] = np.asarray(batch[BATCH_INDEXES])
        return stats

    def learn_on_minibatches(
        self,
        batch: SampleBatch,
        *,
        num_sgd_iter: int,
        sgd_minibatch_size: int,
        rng: np.random.Generator,
    ) -> Stats:
        """Run ``num_sgd_iter`` epochs over shuffled minibatches, one optimizer step each.

        Each epoch shuffles the batch's units with ``rng`` (rows; a sequence batch's whole
        sequences) and cuts them into ``env steps // sgd_minibatch_size`` minibatches, the k-th
        ending with the unit that brings the epoch's steps to ``k * sgd_minibatch_size``
        (`rlflow.data.sequences.minibatch_groups`: for rows, full minibatches of exactly that
        many; a batch smaller than that is one minibatch). The batch is converted to tensors
        once and each minibatch indexed from them. Under `data_parallel` each learner takes a
        run of a minibatch's units, weighted by their steps; with its ``own_batches`` (DD-PPO)
        each learns on its own batch, cut into the number of minibatches every rank agreed on
        (`DataParallel.agree_minibatches`: near-equal runs of the shuffled units), each step
        weighted by the batch's share of all ranks' steps. Returns every stat averaged over
        all steps, plus ``"num_steps"``: summed on the device and brought to the host once.
        """
        owner = type(self.policy).__name__
        check_int(num_sgd_iter, f"{owner}.learn_on_minibatches: num_sgd_iter", low=1)
        size = check_int(sgd_minibatch_size, f"{owner}.learn_on_minibatches: size", low=1)
        lag = self.lag_stats(batch)  # before the first step: later minibatches add the epochs
        collected: dict[str, list[Any]] = {}
        steps = 0
        for stats in self._minibatch_steps(batch, num_sgd_iter, size, rng):
            for key, val in stats.items():
                collected.setdefault(key, []).append(val)
            steps += 1
        # One mean per stat over all steps (a tensor op per step and stat cost 2% of a CPU
        # PPO update); absent from some steps: averaged over all steps, as zero there.
        out = stats_to_host({key: _mean(vals, steps) for key, vals in collected.items()})
        out["num_steps"] = float(steps)
        return {**out, **lag}

    def _minibatch_steps(
        self, batch: SampleBatch, num_sgd_iter: int, size: int, rng: np.random.Generator
    ) -> Iterator[Stats]:
        """One optimizer step per minibatch, epoch after epoch; each one's stats (on the
        device where they can stay there)."""
        units = _Units(batch, rows=self.policy.recurrent)
        tensors = self.batch_to_tensors(batch)
        columns = {k: t for k, t in tensors.items() if k not in LAYOUT_KEYS}
        device = self.policy.device
        parallel = self.data_parallel
        own = parallel is not None and parallel.own_batches
        if own:  # DD-PPO: this rank's batch, weighted; as many minibatches as every rank
            assert parallel is not None
            steps = int(units.steps.sum())
            share = parallel.batch_share(steps)
            count = parallel.agree_minibatches(steps, size)
        for _ in range(num_sgd_iter):
            order = rng.permutation(units.count)
            groups = (
                np.array_split(order, count) if own else minibatch_groups(units.steps, order, size)
            )
            for group in groups:
                weight = 1.0
                if own:
                    weight = share if len(group) else 0.0
                elif parallel is not None:  # this learner's run of the minibatch
                    first, end, weight = parallel.share_runs(units.steps[group])
                    group = group[first:end]
                rows, layout = units.take(group)
                index = torch.from_numpy(rows).to(device)
                part = {k: t[index] for k, t in columns.items()}
                part.update({k: self._to_device(a) for k, a in layout.items()})
                stats = self._gradients(part, weight)
                self.apply_update(stats)
                yield stats

    def lag_stats(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """``{POLICY_LAG: num_grad_updates minus the mean of the batch's NUM_GRAD_UPDATES}``;
        empty when the batch has no such column (built by hand)."""
        versions = batch.get(NUM_GRAD_UPDATES)
        if versions is None or len(versions) == 0:
            return {}
        return {POLICY_LAG: float(self.num_grad_updates - np.mean(versions))}

    def compute_gradients(self, batch: Mapping[str, Any]) -> tuple[list[Array], Stats]:
        """The clipped gradients of the loss on ``batch`` as numpy arrays (one per parameter,
        in :attr:`parameters` order), and the stats. The weights and the optimizer are not
        changed."""
        stats = stats_to_host(self._backward(batch))
        grads = [
            p.grad.detach().cpu().numpy().copy() for p in self.parameters if p.grad is not None
        ]
        return grads, stats

    def apply_gradients(self, grads: Sequence[npt.ArrayLike]) -> None:
        """Take one optimizer step with ``grads`` as :meth:`compute_gradients` gives them."""
        owner = type(self.policy).__name__
        if len(grads) != len(self.parameters):
            raise ConfigError(
                f"{owner}.apply_gradients: got {len(grads)} gradients for "
                f"{len(self.parameters)} parameters; pass the list compute_gradients returned."
            )
        for p, g in zip(self.parameters, grads, strict=True):
            grad = torch.as_tensor(np.asarray(g), dtype=p.dtype, device=p.device)
            if grad.shape != p.shape:
                raise ConfigError(
                    f"{owner}.apply_gradients: gradient shape {tuple(grad.shape)} does not "
                    f"match parameter shape {tuple(p.shape)}."
                )
            p.grad = grad.clone()
        norms = torch._foreach_norm([p.grad for p in self.parameters if p.grad is not None])
        self.apply_update({"grad_gnorm": torch.stack(norms).norm()} if norms else {})

    def minimize(self, loss: torch.Tensor, stats: Mapping[str, Any]) -> Stats:
        """One guarded optimizer step on ``loss``, which the policy computed itself (MAML's
        meta-objective over several batches): gradients, clipping, :meth:`apply_update`.
        Returns ``stats`` with ``total_loss`` and ``grad_gnorm`` (tensors)."""
        for p in self.parameters:
            p.grad = None
        torch.autograd.backward(loss)
        out = self._clipped(loss.detach(), dict(stats), 1.0)
        self.apply_update(out)
        return out

    # -- one step ---------------------------------------------------------------------------

    def shard(self, batch: Mapping[str, Any]) -> tuple[int, int, float]:
        """This learner's rows ``[start, end)`` of one step's ``batch`` under `data_parallel`
        and their weight in the step's mean loss: a run of whole units (rows; a sequence
        batch's sequences), contiguous shards by count (`DataParallel.share_runs`), weighted by
        their env steps (a loss is a mean over steps: V-trace leaves bootstrap rows out)."""
        if self.data_parallel is None:
            raise ConfigError(f"{type(self.policy).__name__}.update.shard: no data_parallel")
        units = _Units(batch, rows=False)
        first, end, weight = self.data_parallel.share_runs(units.steps)
        rows, _ = units.take(np.arange(first, end, dtype=np.int64))
        return (int(rows[0]), int(rows[-1]) + 1, weight) if len(rows) else (0, 0, weight)

    @contextlib.contextmanager
    def _sharded(self, batch: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], float]]:
        """This learner's part of one step's ``batch`` (:meth:`shard`) and its weight (the
        whole batch and 1.0 without `data_parallel`); inside, :attr:`shard_span` says which rows
        of the step it holds."""
        if self.data_parallel is None:
            yield batch, 1.0
            return
        if self.data_parallel.own_batches:  # DD-PPO: the whole batch, weighted among ranks
            steps = int(_Units(batch, rows=False).steps.sum())
            yield batch, self.data_parallel.batch_share(steps)
            return
        batch = batch if isinstance(batch, SampleBatch) else SampleBatch(batch)
        start, stop, weight = self.shard(batch)
        self.shard_span = (start, stop, batch.count)
        try:
            yield batch.slice(start, stop), weight
        finally:
            self.shard_span = None

    def _backward(self, batch: Mapping[str, Any]) -> Stats:
        """Fill the parameters' ``.grad`` (clipped) from the loss on this learner's shard of
        ``batch``; the stats (tensors left on the device: `stats_to_host` brings them back)."""
        with self._sharded(batch) as (part, weight):
            return self._gradients(self.batch_to_tensors(part), weight)

    def _step(self, batch: Mapping[str, Any]) -> Stats:
        """One optimizer step on ``batch`` (:meth:`apply_update`); its stats, on the device."""
        stats = self._backward(batch)
        self.apply_update(stats)
        return stats

    def _gradients(self, tensors: dict[str, torch.Tensor], weight: float) -> Stats:
        """The gradients of the loss on ``tensors`` (this learner's shard of a step, of weight
        ``weight`` in it) into ``.grad``, averaged over the learners and clipped; the stats. A
        learner whose shard is empty (``weight`` 0: fewer units than learners) computes
        nothing and adds zero to the average."""
        for p in self.parameters:
            p.grad = None
        stats: Stats = {}
        loss = torch.zeros((), device=self.policy.device)
        if weight != 0.0:
            loss, stats = self.policy.loss(tensors)
            torch.autograd.backward(loss)
            loss = loss.detach()
        return self._clipped(loss, stats, weight)

    def _clipped(self, loss: torch.Tensor, stats: Stats, weight: float) -> Stats:
        """After a backward pass: gradients of the parameters it did not reach (zeros, or none
        with ``skip_unreached``), averaged over the learners (`data_parallel`), clipped by
        ``grad_clip``; ``stats`` with ``total_loss`` and ``grad_gnorm``."""
        if self.skip_unreached:
            params = [p for p in self.parameters if p.grad is not None]
        else:
            params = self.parameters
            for p in params:
                if p.grad is None:
                    # Parameters the loss skips (the value head without a critic) get zeros so
                    # that both learning paths feed Adam the same set of gradients.
                    p.grad = torch.zeros_like(p)
        if self.data_parallel is not None:
            *grads, mean_loss = self.data_parallel.all_reduce_mean(
                [p.grad for p in params if p.grad is not None] + [loss], weight
            )
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            loss = mean_loss.reshape(())
        clip = self.policy.config.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(params, float("inf") if clip is None else clip)
        return {**stats, "total_loss": loss, "grad_gnorm": norm}

    def apply_update(self, stats: Mapping[str, Any]) -> bool:
        """Take the optimizer step on the gradients a step left (or `apply_gradients` set),
        unless the update is not finite: ``total_loss`` or ``grad_gnorm`` in ``stats`` NaN or
        infinite (a NaN anywhere in the loss or the gradients shows in one of the two). Such an
        update is skipped: the weights, the optimizer state and :attr:`num_grad_updates` stay
        as they were, :attr:`num_nonfinite_updates` counts it, and ``max_nonfinite_updates``
        skipped in a row raise `NonFiniteError` (:meth:`nonfinite_report`). True when the step
        was taken.

        The check reads two numbers on the host: on an accelerator it waits for the backward
        pass (one synchronisation per update; `learn_on_batch` has one anyway for its stats).
        """
        checked = [stats[k] for k in ("total_loss", "grad_gnorm") if k in stats]
        self.last_update_skipped = not _finite(checked)
        if self.last_update_skipped:
            self.num_nonfinite_updates += 1
            self._nonfinite_streak += 1
            if self._nonfinite_streak >= self.policy.config.max_nonfinite_updates:
                raise NonFiniteError(self.nonfinite_report(stats))
            return False
        self.optimizer.step()
        self.num_grad_updates += 1
        self._nonfinite_streak = 0
        self._last_finite = dict(stats)
        return True

    def nonfinite_report(self, stats: Mapping[str, Any]) -> str:
        """The message of `NonFiniteError` after ``max_nonfinite_updates`` skipped updates in a
        row, ``stats`` the last one's: the policy, the loss terms that were not finite and
        their last finite values (of the last update that was taken)."""
        host = {k: v for k, v in stats_to_host(stats).items() if _is_number(v)}
        last = {k: v for k, v in stats_to_host(self._last_finite).items() if _is_number(v)}
        bad = [k for k, v in host.items() if not np.all(np.isfinite(v))]
        shown = ", ".join(f"{k}={_short(host[k])}" for k in bad) or "the gradients"
        before = (
            ", ".join(f"{k}={_short(last[k])}" for k in bad if k in last)
            if last
            else "none (no update was finite yet)"
        )
        config = self.policy.config
        return (
            f"policy {self.policy.policy_id!r} ({type(self.policy).__name__}): "
            f"{self._nonfinite_streak} updates in a row had a NaN or infinite loss or gradient "
            f"(max_nonfinite_updates={config.max_nonfinite_updates}); each was skipped, so the "
            f"weights are those of the last finite update ({self.num_grad_updates} updates "
            f"taken, {self.num_nonfinite_updates} skipped). Not finite in the last one: "
            f"{shown}; their last finite values: {before}. Usual causes: a learning rate too "
            f"large (lr={self.lr}), no gradient clipping (grad_clip={config.grad_clip}), or "
            "NaN/inf in the batch (see on_nonfinite)"
        )

    # -- state ------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """The optimizer state (None before the first step; tensors on CPU, so a checkpoint of
        a GPU learner loads anywhere) and the counters; shares nothing with the live update."""
        optimizer = self._optimizer
        return {
            "optimizer": (
                None if optimizer is None else _to_cpu(copy.deepcopy(optimizer.state_dict()))
            ),
            "num_grad_updates": self.num_grad_updates,
            "num_nonfinite_updates": self.num_nonfinite_updates,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state` (the keys a policy's state holds; counters missing in
        older checkpoints count from 0).

        Without an ``lr_schedule`` the learning rates stay this policy's config's (``lr`` and a
        policy's per-group rates, e.g. ``actor_lr``): a run restored with another ``lr``
        (``Trainer.restore(..., lr=...)``, a population-based training trial that copied
        another's weights and perturbed its ``lr``) trains at that rate, with the saved
        moments. With a schedule the saved rates are kept until the next global ``timestep``
        moves them."""
        if state["optimizer"] is None:
            self._optimizer = None  # never stepped: a fresh one is built on first use
        else:
            optimizer = self.optimizer
            rates = [group["lr"] for group in optimizer.param_groups]
            optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
            if self.lr_schedule is None:
                for group, rate in zip(optimizer.param_groups, rates, strict=True):
                    group["lr"] = rate
        self.num_grad_updates = int(state.get("num_grad_updates", 0))
        self.num_nonfinite_updates = int(state.get("num_nonfinite_updates", 0))

    def __repr__(self) -> str:
        return (
            f"PolicyUpdate({type(self.policy).__name__}, lr={self.lr}, "
            f"num_grad_updates={self.num_grad_updates})"
        )


def stats_to_host(stats: Mapping[str, Any]) -> dict[str, Any]:
    """``stats`` with every tensor copied to the host in one transfer (one synchronisation with
    the device, however many stats): a 0-d tensor becomes a float, any other a float32 numpy
    array of its shape (e.g. per-row TD errors); other values are kept.

    >>> stats_to_host({"loss": torch.tensor(0.5), "td": torch.tensor([1.0, -2.0]), "n": 3})
    {'loss': 0.5, 'td': array([ 1., -2.], dtype=float32), 'n': 3}
    """
    tensors = {k: v for k, v in stats.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        return dict(stats)
    flat = torch.cat([v.detach().reshape(-1).to(torch.float32) for v in tensors.values()])
    host = flat.cpu().numpy()
    out = dict(stats)
    offset = 0
    for key, value in tensors.items():
        part = host[offset : offset + value.numel()]
        offset += value.numel()
        out[key] = float(part[0]) if value.dim() == 0 else part.reshape(value.shape).copy()
    return out


def _mean(values: list[Any], steps: int) -> Any:
    """The sum of ``values`` (floats, or tensors of one shape, each step's stat) over ``steps``:
    one stacked sum for tensors."""
    if all(isinstance(v, torch.Tensor) for v in values):
        return torch.stack(values).sum(dim=0) / max(steps, 1)
    return sum(float(v) for v in values) / max(steps, 1)


def _finite(values: Sequence[Any]) -> bool:
    """Whether every number in ``values`` (numbers, and tensors of one element: a loss, a
    gradient norm) is finite. On CPU each is read as a float (under a microsecond; building
    tensors for the check cost 19 us, 5% of a small PPO update); on an accelerator all are
    checked there and read back in one transfer."""
    on_device: list[torch.Tensor] = []
    on_host: list[Any] = []
    for v in values:
        (on_device if isinstance(v, torch.Tensor) and v.device.type != "cpu" else on_host).append(v)
    if on_device and not bool(torch.stack([torch.isfinite(v).all() for v in on_device]).all()):
        return False
    return all(math.isfinite(float(v)) for v in on_host)


def _is_number(value: Any) -> bool:
    return isinstance(value, float | int | np.ndarray) and not isinstance(value, bool)


def _short(value: Any) -> str:
    """A stat in a message: a float as ``%.6g``, an array by how many of its values are not
    finite."""
    if isinstance(value, np.ndarray):
        bad = value[~np.isfinite(value)]
        return f"array with {bad.size} of {value.size} not finite" if bad.size else "finite array"
    return f"{float(value):.6g}"


def _to_cpu(value: Any) -> Any:
    """``value`` (an optimizer state: nested dicts and lists) with every tensor on CPU."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value
