"""`VTracePolicy` (IMPALA) and `APPOPolicy`: actor-critic losses on V-trace targets.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures" (ICML 2018), section 4. The workers act with a slightly stale policy mu (its
log-probabilities are the batch's `LOGP`); the learner corrects with V-trace
(:func:`rlflow.vtrace.vtrace`), computed on the learner's current values:

    policy_loss = -mean(log pi(a_t|x_t) * pg_advantages_t)
    vf_loss     = 0.5 * mean((V(x_t) - vs_t)^2)
    loss        = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * entropy

V-trace needs time-ordered sequences. A worker's batch is ordered by sub-env, then time, and
train batches concatenate several of them, so :func:`sequence_ends` cuts the rows into
sequences: row i continues into row i+1 only when both have the same `EPS_ID`, row i did not
end its episode and row i's `NEXT_OBS` is row i+1's `OBS`. Each sequence bootstraps from the
learner's V(`NEXT_OBS`) of its last row (0 after a terminal step). The policy asks its workers
for `NEXT_OBS` (``requires_next_obs``) so that any contiguous slice of a batch is a valid input,
which is what lets :meth:`VTracePolicy.learn_on_minibatches` cut minibatches anywhere.

:class:`APPOPolicy` (asynchronous PPO) takes V-trace targets with the *target network* as
pi, and PPO's clipped surrogate on the ratio pi / pi_target (through mu, as RLlib does; the
importance weight mu / pi_target is clipped to [0, 2]). The plan copies the model into the target
network every ``target_network_update_freq`` trained env steps (``update_target``). An optional
KL(mu || pi) penalty is added with ``use_kl_loss``.

Config keys (besides the base ones), RLlib's names and defaults: ``vtrace_clip_rho_threshold``
(1.0, > 0), ``vtrace_clip_pg_rho_threshold`` (1.0, > 0), ``vf_loss_coeff`` (0.5, >= 0),
``entropy_coeff`` (0.01, >= 0); APPO also ``clip_param`` (0.4, > 0), ``use_kl_loss`` (False),
``kl_coeff`` (1.0, >= 0).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    EPS_ID,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.policy.policy import TorchPolicy
from rlflow.vtrace import VTraceReturns, vtrace

__all__ = ["APPOPolicy", "VTracePolicy", "sequence_ends"]

Array = npt.NDArray[Any]


def sequence_ends(
    obs: npt.ArrayLike,
    next_obs: npt.ArrayLike,
    eps_id: npt.ArrayLike,
    terminateds: npt.ArrayLike,
    truncateds: npt.ArrayLike,
) -> npt.NDArray[np.bool_]:
    """Which rows end a time-ordered sequence (``[N]`` bools; the last row always does).

    Row i continues into row i+1 iff ``eps_id[i] == eps_id[i+1]``, row i neither terminated
    nor truncated, and ``next_obs[i] == obs[i+1]`` (so two fragments of one episode that happen
    to be adjacent are joined, while rows of different sub-envs or out of order never are).

    >>> sequence_ends([0, 1, 5, 6], [1, 2, 6, 7], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0])
    array([False,  True, False,  True])
    """
    obs_a, next_a = np.asarray(obs), np.asarray(next_obs)
    eps, term, trunc = np.asarray(eps_id), np.asarray(terminateds), np.asarray(truncateds)
    n = eps.shape[0]
    ends = np.ones(n, dtype=bool)
    if n > 1:
        same_obs = (next_a[:-1] == obs_a[1:]).reshape(n - 1, -1).all(axis=1)
        continues = (eps[1:] == eps[:-1]) & ~term[:-1].astype(bool) & ~trunc[:-1].astype(bool)
        ends[:-1] = ~(continues & same_obs)
    return ends


class VTracePolicy(TorchPolicy):
    """IMPALA's policy: policy gradient on V-trace advantages, value regression to ``vs``.

    Reads the batch columns `OBS`, `NEXT_OBS`, `ACTIONS`, `REWARDS`, `TERMINATEDS`,
    `TRUNCATEDS`, `EPS_ID` and `LOGP` (the behaviour policy's log-probabilities). Stats:
    ``policy_loss``, ``vf_loss``, ``entropy``, ``mean_rho``, ``mean_vs``.
    """

    requires_next_obs = True
    """Workers store `NEXT_OBS`, from which sequences bootstrap (see :func:`sequence_ends`)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: Mapping[str, Any],
        *,
        seed: int | None = None,
    ) -> None:
        """Build as :class:`TorchPolicy` does and read the V-trace coefficients."""
        super().__init__(observation_space, action_space, config, seed=seed)
        self.clip_rho = self._number("vtrace_clip_rho_threshold", 1.0, low=0.0, low_open=True)
        self.clip_pg_rho = self._number("vtrace_clip_pg_rho_threshold", 1.0, low=0.0, low_open=True)
        self.vf_loss_coeff = self._number("vf_loss_coeff", 0.5, low=0.0)
        self.entropy_coeff = self._number("entropy_coeff", 0.01, low=0.0)

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of the fragment unchanged: V-trace is computed by the learner."""
        return batch.copy()

    def compute_vtrace(
        self,
        batch: Mapping[str, Any],
        target_logp: npt.ArrayLike,
        values: npt.ArrayLike,
    ) -> VTraceReturns:
        """V-trace over every sequence of ``batch``; flat ``[N]`` arrays in row order.

        ``target_logp`` and ``values`` are pi's log-probabilities of the batch's actions and the
        learner's V(`OBS`), one per row. Bootstrap values are the learner's V(`NEXT_OBS`) at
        each sequence's last row, 0 after a terminal step.
        """
        obs, next_obs = np.asarray(batch[OBS]), np.asarray(batch[NEXT_OBS])
        terminated = np.asarray(batch[TERMINATEDS]).astype(bool)
        ends = sequence_ends(obs, next_obs, batch[EPS_ID], terminated, batch[TRUNCATEDS])
        end_rows = np.flatnonzero(ends)
        bootstrap = np.zeros(obs.shape[0], dtype=np.float64)
        live = end_rows[~terminated[end_rows]]
        if live.size:
            bootstrap[live] = self.value(next_obs[live])
        discounts = self.gamma * (1.0 - terminated.astype(np.float64))
        behaviour = np.asarray(batch[LOGP], dtype=np.float64)
        target = np.asarray(target_logp, dtype=np.float64)
        rewards = np.asarray(batch[REWARDS], dtype=np.float64)
        vals = np.asarray(values, dtype=np.float64)
        parts: list[VTraceReturns] = []
        start = 0
        for end in end_rows.tolist():
            rows = slice(start, end + 1)
            parts.append(
                vtrace(
                    behaviour[rows],
                    target[rows],
                    rewards[rows],
                    vals[rows],
                    bootstrap[end],
                    discounts[rows],
                    clip_rho_threshold=self.clip_rho,
                    clip_pg_rho_threshold=self.clip_pg_rho,
                )
            )
            start = end + 1
        return VTraceReturns(*(np.concatenate(field) for field in zip(*parts, strict=True)))

    def _check_columns(self, batch_tensors: Mapping[str, torch.Tensor]) -> None:
        """Raise ConfigError naming the missing columns (e.g. a worker without NEXT_OBS)."""
        needed = (OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS, EPS_ID, LOGP)
        missing = [c for c in needed if c not in batch_tensors]
        if missing:
            raise ConfigError(
                f"{type(self).__name__}.loss: the batch lacks columns {missing}; it needs "
                f"{list(needed)} (rollout workers add NEXT_OBS for policies with "
                "requires_next_obs = True)"
            )

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Return the IMPALA loss on a (mini)batch and its parts as stats."""
        self._check_columns(batch_tensors)
        dist_inputs, values = self.model(batch_tensors[OBS])
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(batch_tensors[ACTIONS])
        vt = self.compute_vtrace(batch_tensors, logp.detach().numpy(), values.detach().numpy())
        pg_adv = torch.as_tensor(vt.pg_advantages, dtype=logp.dtype)
        vs = torch.as_tensor(vt.vs, dtype=values.dtype)
        policy_loss = -(logp * pg_adv).mean()
        vf_loss = 0.5 * (values - vs).pow(2).mean()
        entropy = dist.entropy().mean()
        total = policy_loss + self.vf_loss_coeff * vf_loss - self.entropy_coeff * entropy
        stats = {
            "policy_loss": float(policy_loss.detach()),
            "vf_loss": float(vf_loss.detach()),
            "entropy": float(entropy.detach()),
            "mean_rho": float(vt.rhos.mean()),
            "mean_vs": float(vt.vs.mean()),
        }
        return total, stats

    def learn_on_minibatches(
        self,
        batch: SampleBatch,
        *,
        num_epochs: int,
        minibatch_size: int,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Run ``num_epochs`` passes over *contiguous* minibatches, one optimizer step each.

        Unlike the base class the rows are not shuffled (V-trace needs sequences): the batch
        is cut into consecutive slices of ``minibatch_size`` rows (the last may be shorter)
        and each epoch visits them in an order drawn from ``rng``. Returns every stat averaged
        over all steps, plus ``"num_steps"``.
        """
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 1:
            raise ConfigError(
                f"{type(self).__name__}.learn_on_minibatches: num_epochs={num_epochs!r} "
                "must be an int >= 1."
            )
        if isinstance(minibatch_size, bool) or not isinstance(minibatch_size, int):
            raise ConfigError(f"minibatch_size={minibatch_size!r} must be an int >= 1")
        size = max(1, minibatch_size)
        starts = list(range(0, batch.count, size))
        totals: dict[str, float] = {}
        for _ in range(num_epochs):
            for start in rng.permutation(starts).tolist():
                for key, val in self.learn_on_batch(batch.slice(start, start + size)).items():
                    totals[key] = totals.get(key, 0.0) + val
        steps = num_epochs * len(starts)
        stats = {key: total / max(steps, 1) for key, total in totals.items()}
        stats["num_steps"] = float(steps)
        return stats


class APPOPolicy(VTracePolicy):
    """Asynchronous PPO: clipped surrogate on V-trace advantages against a target network.

    Reads the columns of :class:`VTracePolicy` and, with ``use_kl_loss``,
    `ACTION_DIST_INPUTS`. Stats: those of :class:`VTracePolicy` plus ``kl``, ``clip_frac``.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: Mapping[str, Any],
        *,
        seed: int | None = None,
    ) -> None:
        """Build as :class:`VTracePolicy` does, read the PPO coefficients, copy the target."""
        super().__init__(observation_space, action_space, config, seed=seed)
        self.clip_param = self._number("clip_param", 0.4, low=0.0, low_open=True)
        self.use_kl_loss = bool(self.config.get("use_kl_loss", False))
        self.kl_coeff = self._number("kl_coeff", 1.0, low=0.0)
        self.target_model = copy.deepcopy(self.model)
        """The target network pi_target (V-trace's pi and the surrogate's denominator)."""
        self.target_model.requires_grad_(False)

    def update_target(self) -> None:
        """Copy the model's weights into the target network."""
        self.target_model.load_state_dict(self.model.state_dict())

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Return the APPO loss on a (mini)batch and its parts as stats."""
        self._check_columns(batch_tensors)
        obs, actions = batch_tensors[OBS], batch_tensors[ACTIONS]
        dist_inputs, values = self.model(obs)
        dist = self.dist_class(dist_inputs)
        logp = dist.logp(actions)
        with torch.no_grad():
            target_inputs, _ = self.target_model(obs)
            target_logp = self.dist_class(target_inputs).logp(actions)
        vt = self.compute_vtrace(batch_tensors, target_logp.numpy(), values.detach().numpy())
        adv = torch.as_tensor(vt.pg_advantages, dtype=logp.dtype)
        behaviour_logp = batch_tensors[LOGP]
        # pi / pi_target, computed through mu as RLlib does, with mu / pi_target clipped.
        is_ratio = torch.exp(behaviour_logp - target_logp).clamp(0.0, 2.0)
        ratio = is_ratio * torch.exp(logp - behaviour_logp)
        clipped = ratio.clamp(1.0 - self.clip_param, 1.0 + self.clip_param)
        policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
        vf_loss = 0.5 * (values - torch.as_tensor(vt.vs, dtype=values.dtype)).pow(2).mean()
        entropy = dist.entropy().mean()
        total = policy_loss + self.vf_loss_coeff * vf_loss - self.entropy_coeff * entropy
        kl = torch.zeros(())
        if self.use_kl_loss:
            kl = self.dist_class(batch_tensors[ACTION_DIST_INPUTS]).kl(dist).mean()
            total = total + self.kl_coeff * kl
        stats = {
            "policy_loss": float(policy_loss.detach()),
            "vf_loss": float(vf_loss.detach()),
            "entropy": float(entropy.detach()),
            "mean_rho": float(vt.rhos.mean()),
            "mean_vs": float(vt.vs.mean()),
            "kl": float(kl.detach()),
            "clip_frac": float(((ratio.detach() - 1.0).abs() > self.clip_param).float().mean()),
        }
        return total, stats

    def get_state(self) -> dict[str, Any]:
        """Return the base snapshot plus the target network's weights."""
        target = {k: v.numpy().copy() for k, v in self.target_model.state_dict().items()}
        return {**super().get_state(), "target_weights": target}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`, the target network included."""
        super().set_state(state)
        if "target_weights" in state:
            weights = {k: torch.as_tensor(np.array(v)) for k, v in state["target_weights"].items()}
            self.target_model.load_state_dict(weights)
