"""`MAMLPolicy`: a Gaussian MLP policy with MAML's inner step and a PPO-clipped meta-objective.

Finn et al., "Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks" (ICML 2017),
with the trust-region-style outer objective of RLlib's MAML (a clipped surrogate, as in PPO,
Schulman et al. 2017). For a task i with samples ``D_i^0 .. D_i^K`` (``D_i^k`` drawn with the
parameters after k inner steps):

    theta_i^0     = theta
    theta_i^{k+1} = theta_i^k - inner_lr * grad L_pg(theta_i^k; D_i^k)       (inner step)
    L_pg(th; D)   = -mean(log pi_th(a|s) * A)                                  (vanilla PG)
    L_meta(theta) = mean_i [ L_clip(theta_i^K(theta); D_i^K) + kl_coeff * KL ] (outer)

``L_clip`` is PPO's clipped surrogate with the ratio ``pi_{theta_i^K(theta)} / pi_sampled``
(`LOGP` of ``D_i^K``) and ``KL = mean KL(pi_sampled || pi_{theta_i^K(theta)})``. A rollout
worker takes the inner steps in place (:meth:`MAMLPolicy.adapt`); the learner recomputes them
*differentiably* from the same batches (``torch.func.functional_call`` on a parameter dict,
``create_graph=True``), so the meta-gradient includes the second-order terms, and takes
``num_steps`` Adam steps on ``L_meta`` (:meth:`MAMLPolicy.meta_update`).

Advantages come from a linear feature baseline fit per batch (:func:`linear_feature_baseline`,
the baseline of the MAML and ProMP papers), standardized per batch. Why not GAE with a critic:
a critic shared by all tasks cannot tell the tasks apart (in point navigation the observation
is only the position, the goal is hidden), so its values would be wrong for every task until it
is adapted too; a least-squares fit on each task's own batch is task-specific by construction,
needs no training and costs one small solve. The policy therefore has no critic
(``use_critic`` is forced off; the value head is unused and never adapted).

Reads `MAMLConfig`'s ``inner_lr`` (MAML's alpha), ``clip_param``, ``kl_coeff`` (adapted by
:meth:`MAMLPolicy.update_kl` like PPO's) and ``kl_target`` besides the shared settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch.func import functional_call

from rlflow.algorithms.maml.config import MAMLConfig
from rlflow.checks import check_int
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    ADVANTAGES,
    EPS_ID,
    LOGP,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.learner import PolicyUpdate
from rlflow.policy.policy import TorchPolicy, adaptive_kl_coeff

__all__ = ["MAMLPolicy", "episode_returns", "episode_timesteps", "linear_feature_baseline"]

Array = npt.NDArray[Any]
Params = dict[str, torch.Tensor]

_VALUE_HEAD = "vf."
"""Parameter-name prefix of the (unused) value head; never adapted."""


def episode_timesteps(eps_id: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The time index of each row within its episode: 0, 1, ... along each run of equal ids.

    Rows must be ordered by episode, then time (as a rollout worker's batch is). An episode
    that began before the batch restarts at 0 here.

    >>> episode_timesteps([7, 7, 7, 9, 9, 4]).tolist()
    [0, 1, 2, 0, 1, 0]
    """
    ids = np.asarray(eps_id)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    lengths = np.diff(np.r_[starts, ids.size])
    return np.arange(ids.size, dtype=np.int64) - np.repeat(starts, lengths)


def linear_feature_baseline(
    obs: npt.ArrayLike, returns: npt.ArrayLike, timesteps: npt.ArrayLike, *, reg: float = 1e-5
) -> Array:
    """Least-squares fit of ``returns`` on per-step features; returns the fitted values.

    Features per row (rllab's ``LinearFeatureBaseline``, used by MAML and ProMP): the
    observation clipped to [-10, 10], its square, ``t / 100``, its square and cube, and 1.
    Solves ``(F^T F + reg * I) w = F^T R`` and raises ``reg`` tenfold (up to five times) while
    the solution is not finite. Shapes: ``obs [N, ...]``, ``returns [N]``, ``timesteps [N]``.

    >>> t = np.arange(4)
    >>> fit = linear_feature_baseline(np.zeros((4, 1)), 2.0 + 0.5 * t, t, reg=0.0)
    >>> np.round(fit, 6).tolist()  # exactly linear in t: the fit is exact
    [2.0, 2.5, 3.0, 3.5]
    """
    o = np.clip(np.asarray(obs, dtype=np.float64).reshape(len(np.asarray(returns)), -1), -10, 10)
    al = np.asarray(timesteps, dtype=np.float64).reshape(-1, 1) / 100.0
    feats = np.concatenate([o, o**2, al, al**2, al**3, np.ones_like(al)], axis=1)
    target = np.asarray(returns, dtype=np.float64)
    gram, rhs = feats.T @ feats, feats.T @ target
    eye = np.eye(feats.shape[1])
    weights = np.zeros(feats.shape[1])
    for _ in range(6):
        weights = np.linalg.lstsq(gram + reg * eye, rhs, rcond=None)[0]
        if np.isfinite(weights).all():
            break
        reg = max(reg * 10.0, 1e-8)
    out: Array = feats @ weights
    return out


def episode_returns(batch: Mapping[str, Array]) -> list[float]:
    """Undiscounted returns of the episodes that end in ``batch`` (terminated or truncated).

    An episode counts only when its last row in the batch ends it; rows are grouped by
    `EPS_ID`. The caller makes sure episodes start inside the batch (MAML resets the envs
    before each sample), else a return covers only the batch's part of the episode.
    """
    ids, rewards = np.asarray(batch[EPS_ID]), np.asarray(batch[REWARDS], dtype=np.float64)
    done = np.asarray(batch[TERMINATEDS]) | np.asarray(batch[TRUNCATEDS])
    ended = np.unique(ids[done])
    return [float(rewards[ids == e].sum()) for e in ended]


class MAMLPolicy(TorchPolicy):
    """MAML policy: Gaussian (or categorical) MLP, inner PG steps, clipped meta-objective.

    Rollout workers call :meth:`with_baseline_advantages` on each sampled batch and
    :meth:`adapt` for each inner step; the learner calls :meth:`meta_update`. :meth:`loss` is
    the clipped surrogate at the current parameters (no inner step: what plain multi-task PPO
    without a critic would optimize). Stats of :meth:`meta_update`: ``meta_loss``,
    ``policy_loss``, ``kl``, ``kl_coeff``, ``clip_frac``, ``inner_loss``, ``meta_loss_start``,
    ``grad_gnorm``, ``num_steps``.
    """

    config: MAMLConfig
    config_class: ClassVar[type[AlgorithmConfig]] = MAMLConfig

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: MAMLConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build as :class:`~rlflow.policy.TorchPolicy` does (no critic); start the KL
        coefficient at ``kl_coeff``."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.kl_coeff = config.kl_coeff
        """Current KL penalty coefficient; changed by :meth:`update_kl`."""
        self.adapted_names = [
            name for name, _ in self.model.named_parameters() if not name.startswith(_VALUE_HEAD)
        ]
        """Names of the parameters the inner step changes (all but the value head)."""

    def make_update(self) -> PolicyUpdate:
        """The base's update, leaving alone what the meta-loss does not reach (the unused value
        head)."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        return PolicyUpdate(self, params, skip_unreached=True)

    def update_kl(self, sampled_kl: float) -> float:
        """Adapt ``kl_coeff`` to the KL of the last meta-update; return the new value."""
        self.kl_coeff = adaptive_kl_coeff(self.kl_coeff, sampled_kl, self.config.kl_target)
        return self.kl_coeff

    # -- advantages -------------------------------------------------------------------------

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Discounted returns (bootstrap 0: no critic) as `VALUE_TARGETS` and `ADVANTAGES`;
        :meth:`with_baseline_advantages` later turns them into baselined advantages."""
        out = super().postprocess_trajectory(batch, last_value=0.0)
        out[VALUE_TARGETS] = out[ADVANTAGES].copy()
        return out

    def with_baseline_advantages(self, batch: SampleBatch) -> SampleBatch:
        """A copy of a (whole) sampled batch whose `ADVANTAGES` are ``returns - baseline``,
        standardized; the baseline is :func:`linear_feature_baseline` fit on this batch (its
        `VALUE_TARGETS`, the discounted returns). Calling it again gives the same result."""
        returns = np.asarray(batch[VALUE_TARGETS], dtype=np.float64)
        timesteps = episode_timesteps(batch[EPS_ID])
        advantages = returns - linear_feature_baseline(batch[OBS], returns, timesteps)
        std = float(advantages.std()) if advantages.size else 0.0
        advantages = (advantages - advantages.mean()) / max(std, 1e-8)
        out = batch.copy()
        out[ADVANTAGES] = advantages.astype(np.float32)
        return out

    # -- the inner step ---------------------------------------------------------------------

    def meta_parameters(self) -> Params:
        """The model's adapted parameters by name (live tensors: gradients reach them)."""
        named = dict(self.model.named_parameters())
        return {name: named[name] for name in self.adapted_names}

    def inner_loss(self, params: Params, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Vanilla policy-gradient loss ``-mean(logp(a|s) * A)`` at ``params``."""
        dist_inputs, _ = functional_call(self.model, params, (batch[OBS],))
        logp = self.dist_class(dist_inputs).logp(batch[ACTIONS])
        return -(logp * batch[ADVANTAGES]).mean()

    def inner_step(
        self, params: Params, batch: Mapping[str, torch.Tensor], *, create_graph: bool
    ) -> Params:
        """One SGD step ``params - inner_lr * grad inner_loss(params; batch)``.

        With ``create_graph=True`` the result stays a differentiable function of ``params``
        (second-order MAML); else the gradient is treated as a constant.
        """
        loss = self.inner_loss(params, batch)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
        return {
            name: p - self.config.inner_lr * g
            for (name, p), g in zip(params.items(), grads, strict=True)
        }

    def adapted_parameters(
        self, batches: Sequence[Mapping[str, torch.Tensor]], *, create_graph: bool = True
    ) -> Params:
        """The parameters after one inner step on each of ``batches`` in turn, from the
        current (meta) parameters; ``batches`` empty gives the meta-parameters themselves."""
        params = self.meta_parameters()
        for batch in batches:
            params = self.inner_step(params, batch, create_graph=create_graph)
        return params

    def adapt(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """Take one inner step on ``batch`` in place (a worker adapting to its task).

        The optimizer's state is untouched. Returns ``{"inner_loss": loss before the step}``.
        """
        tensors = self.update.batch_to_tensors(batch)
        params = self.meta_parameters()
        loss = self.inner_loss(params, tensors)
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, g in zip(params.values(), grads, strict=True):
                p.sub_(self.config.inner_lr * g)
        return {"inner_loss": float(loss.detach())}

    # -- the meta-update --------------------------------------------------------------------

    def surrogate(
        self, params: Params, batch: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's clipped surrogate (plus ``kl_coeff * KL``) at ``params`` on sampled rows."""
        dist_inputs, _ = functional_call(self.model, params, (batch[OBS],))
        dist = self.dist_class(dist_inputs)
        old = self.dist_class(batch[ACTION_DIST_INPUTS])
        ratio = torch.exp(dist.logp(batch[ACTIONS]) - batch[LOGP])
        adv = batch[ADVANTAGES]
        clip_param = self.config.clip_param
        clipped = ratio.clamp(1.0 - clip_param, 1.0 + clip_param)
        policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
        kl = old.kl(dist).mean()
        clip_frac = ((ratio - 1.0).abs() > clip_param).float().mean()
        total = policy_loss + self.kl_coeff * kl if self.kl_coeff > 0.0 else policy_loss
        return total, {"policy_loss": policy_loss, "kl": kl, "clip_frac": clip_frac}

    def meta_loss(
        self, tasks: Sequence[Sequence[Mapping[str, torch.Tensor]]]
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """``L_meta`` (module docstring) over ``tasks``: per task the batches ``D^0 .. D^K``
        as tensors; the inner steps are recomputed with ``create_graph=True``."""
        if not tasks or any(len(t) == 0 for t in tasks):
            raise ConfigError(
                f"{type(self).__name__}.meta_loss: needs >= 1 task, each with >= 1 batch; got "
                f"{[len(t) for t in tasks]} batches per task"
            )
        total = torch.zeros((), device=self.device)
        sums: dict[str, float] = {"policy_loss": 0.0, "kl": 0.0, "clip_frac": 0.0}
        inner = 0.0
        for batches in tasks:
            params = self.adapted_parameters(batches[:-1], create_graph=True)
            if len(batches) > 1:
                inner += float(self.inner_loss(self.meta_parameters(), batches[0]).detach())
            loss, parts = self.surrogate(params, batches[-1])
            total = total + loss / len(tasks)
            for key, value in parts.items():
                sums[key] += float(value.detach()) / len(tasks)
        stats = {**sums, "inner_loss": inner / len(tasks), "kl_coeff": self.kl_coeff}
        return total, stats

    def meta_update(
        self, tasks: Sequence[Sequence[Mapping[str, Array]]], *, num_steps: int = 1
    ) -> dict[str, float]:
        """Take ``num_steps`` Adam steps on ``L_meta`` over ``tasks`` (per task the sampled
        batches ``D^0 .. D^K`` with advantages); gradients clipped by ``grad_clip``.

        Returns the stats of the last loss evaluation (before the last step; ``kl`` is what
        the adaptive KL coefficient reads), plus ``meta_loss_start`` (the loss before the first
        step), ``grad_gnorm`` (last step) and ``num_steps``.
        """
        check_int(num_steps, f"{type(self).__name__}.meta_update: num_steps", low=1)
        tensors = [[self.update.batch_to_tensors(b) for b in batches] for batches in tasks]
        start = 0.0
        stats: dict[str, float] = {}
        norm = torch.zeros((), device=self.device)
        for step in range(num_steps):
            loss, stats = self.meta_loss(tensors)
            norm = self.update.minimize(loss, stats)["grad_gnorm"]
            if step == 0:
                start = float(loss.detach())
            stats["meta_loss"] = float(loss.detach())
        return {
            **stats,
            "meta_loss_start": start,
            "grad_gnorm": float(norm),
            "num_steps": float(num_steps),
        }

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The clipped surrogate (plus ``kl_coeff * KL``) at the current parameters."""
        total, parts = self.surrogate(self.meta_parameters(), batch_tensors)
        stats = {key: float(value.detach()) for key, value in parts.items()}
        return total, {**stats, "kl_coeff": self.kl_coeff}

    # -- state ------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Return the base snapshot plus the current ``kl_coeff``."""
        return {**super().get_state(), "kl_coeff": self.kl_coeff}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`, ``kl_coeff`` included."""
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))
