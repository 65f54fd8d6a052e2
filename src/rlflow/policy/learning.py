"""`PolicyLearning`: the learning half of `rlflow.policy.TorchPolicy` (a base class of it).

Everything a learner calls on a policy: :meth:`~PolicyLearning.compute_gradients` /
:meth:`~PolicyLearning.apply_gradients` (gradients travel as numpy),
:meth:`~PolicyLearning.learn_on_batch` and :meth:`~PolicyLearning.learn_on_minibatches`
(several SGD epochs over shuffled minibatches), and the policy lag each reports
(`POLICY_LAG`, see `rlflow.policy.policy`). A subclass writes :meth:`PolicyLearning.loss`;
`TorchPolicy` provides the model, the optimizer and the attributes declared below.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rlflow.checks import check_int
from rlflow.data.sample_batch import NUM_GRAD_UPDATES, SampleBatch
from rlflow.errors import ConfigError
from rlflow.policy.adam import Adam

__all__ = ["POLICY_LAG", "PolicyLearning"]

POLICY_LAG = "diff_num_grad_updates_vs_sampler_policy"
"""Learner stat: updates between the weights that sampled a batch and those training on it."""

Array = npt.NDArray[Any]


class PolicyLearning(abc.ABC):
    """Loss, gradients and optimizer steps of a torch policy (`TorchPolicy` extends it)."""

    device: torch.device
    grad_clip: float | None
    num_grad_updates: int
    _params: list[torch.nn.Parameter]

    @property
    @abc.abstractmethod
    def optimizer(self) -> Adam:
        """The optimizer over ``_params`` (`TorchPolicy.optimizer`)."""

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (on CPU) on the policy's device: through pinned memory, non-blocking."""
        if self.device.type == "cpu":
            return tensor
        return tensor.pin_memory().to(self.device, non_blocking=True)

    @abc.abstractmethod
    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Return the scalar loss to minimise on a batch, and float stats to report."""

    def batch_to_tensors(self, batch: Mapping[str, Array]) -> dict[str, torch.Tensor]:
        """Convert the numeric columns of ``batch`` to tensors (float64 becomes float32);
        ``NUM_GRAD_UPDATES`` (bookkeeping, never in a loss) is left out."""
        out: dict[str, torch.Tensor] = {}
        for name, column in batch.items():
            array = np.asarray(column)
            if array.dtype.kind not in "biuf" or name == NUM_GRAD_UPDATES:
                continue
            if array.dtype == np.float64:
                array = array.astype(np.float32)
            array = np.ascontiguousarray(array)
            if not array.flags.writeable:
                # Ray hands out read-only zero-copy arrays; torch needs memory it may write.
                array = array.copy()
            out[name] = self._to_device(torch.from_numpy(array))
        return out

    def _backward(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """Fill every parameter's ``.grad`` (clipped) from the loss on ``batch``; return stats."""
        return self._backward_tensors(self.batch_to_tensors(batch))

    def _backward_tensors(self, tensors: dict[str, torch.Tensor]) -> dict[str, float]:
        """`_backward` on a batch already converted by `batch_to_tensors`."""
        for p in self._params:
            p.grad = None
        loss, stats = self.loss(tensors)
        torch.autograd.backward(loss)
        for p in self._params:
            if p.grad is None:
                # Parameters the loss skips (the value head without a critic) get zeros so that
                # both learning paths feed Adam the same set of gradients.
                p.grad = torch.zeros_like(p)
        max_norm = float("inf") if self.grad_clip is None else self.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        return {**stats, "total_loss": float(loss.detach()), "grad_gnorm": float(norm)}

    def compute_gradients(self, batch: Mapping[str, Array]) -> tuple[list[Array], dict[str, float]]:
        """Return the clipped gradients of the loss on ``batch`` as numpy arrays, and stats.

        One array per trainable parameter, in ``model.parameters()`` order. The weights and
        the optimizer are not changed.
        """
        stats = self._backward(batch)
        grads = [p.grad.detach().cpu().numpy().copy() for p in self._params if p.grad is not None]
        return grads, stats

    def apply_gradients(self, grads: Sequence[npt.ArrayLike]) -> None:
        """Take one optimizer step with ``grads`` as given by :meth:`compute_gradients`."""
        if len(grads) != len(self._params):
            raise ConfigError(
                f"{type(self).__name__}.apply_gradients: got {len(grads)} gradients for "
                f"{len(self._params)} parameters; pass the list compute_gradients returned."
            )
        for p, g in zip(self._params, grads, strict=True):
            grad = torch.as_tensor(np.asarray(g), dtype=p.dtype, device=p.device)
            if grad.shape != p.shape:
                raise ConfigError(
                    f"{type(self).__name__}.apply_gradients: gradient shape {tuple(grad.shape)} "
                    f"does not match parameter shape {tuple(p.shape)}."
                )
            p.grad = grad.clone()
        self.optimizer.step()
        self.num_grad_updates += 1

    def learn_on_batch(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """Take one optimizer step on the whole batch; return the loss stats (with the policy
        lag, see :meth:`lag_stats`)."""
        lag = self.lag_stats(batch)
        stats = self._backward(batch)
        self.optimizer.step()
        self.num_grad_updates += 1
        return {**stats, **lag}

    def lag_stats(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """``{POLICY_LAG: this policy's num_grad_updates minus the mean of the batch's
        NUM_GRAD_UPDATES}``; empty when the batch has no such column (built by hand)."""
        versions = batch.get(NUM_GRAD_UPDATES)
        if versions is None or len(versions) == 0:
            return {}
        return {POLICY_LAG: float(self.num_grad_updates - np.mean(versions))}

    def learn_on_minibatches(
        self,
        batch: SampleBatch,
        *,
        num_sgd_iter: int,
        sgd_minibatch_size: int,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Run ``num_sgd_iter`` passes over shuffled minibatches, one optimizer step each.

        Each epoch reshuffles with ``rng`` and uses ``batch.minibatches(sgd_minibatch_size, rng)``
        (full minibatches only; the whole batch when it is smaller). Returns every stat
        averaged over all steps, plus ``"num_steps"``.
        """
        check_int(num_sgd_iter, f"{type(self).__name__}.learn_on_minibatches: num_sgd_iter", low=1)
        lag = self.lag_stats(batch)  # before the first step: later minibatches add the epochs
        totals: dict[str, float] = {}
        steps = 0
        for minibatch_stats in self._minibatch_steps(batch, num_sgd_iter, sgd_minibatch_size, rng):
            for key, val in minibatch_stats.items():
                totals[key] = totals.get(key, 0.0) + val
            steps += 1
        stats = {key: total / max(steps, 1) for key, total in totals.items()}
        stats["num_steps"] = float(steps)
        return {**stats, **lag}

    def _minibatch_steps(
        self, batch: SampleBatch, num_sgd_iter: int, size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, float]]:
        """One optimizer step per shuffled minibatch, epoch after epoch; yields each one's stats.

        When `learn_on_batch` and `_backward` are this class's own, the batch is converted to
        tensors once and each minibatch is indexed from them (the same rows, permutation and
        numbers as converting each minibatch of ``batch.minibatches(size, rng)``, without
        re-shuffling and re-converting every column for every step).
        """
        plain = (
            type(self).learn_on_batch is PolicyLearning.learn_on_batch
            and type(self)._backward is PolicyLearning._backward
        )
        if not plain:
            for _ in range(num_sgd_iter):
                for minibatch in batch.minibatches(size, rng):
                    yield self.learn_on_batch(minibatch)
            return
        size = check_int(size, "SampleBatch.minibatches: size", low=1)
        tensors = self.batch_to_tensors(batch)
        count = batch.count
        for _ in range(num_sgd_iter):
            perm = torch.from_numpy(rng.permutation(count)).to(self.device)
            for start in range(0, count - size + 1, size) if size < count else [0] * (count > 0):
                rows = perm[start : start + size]
                stats = self._backward_tensors({k: t[rows] for k, t in tensors.items()})
                self.optimizer.step()
                self.num_grad_updates += 1
                yield stats
