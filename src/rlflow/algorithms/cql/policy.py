"""`CQLPolicy`: SAC's policy with CQL(H)'s conservative critic loss and a BC warm start.

Kumar et al., "Conservative Q-Learning for Offline Reinforcement Learning" (NeurIPS 2020), as
RLlib's CQL computes it. For each critic ``Q_i``, with ``N = num_actions`` actions of each source
per observation (unit space, ``A`` action dimensions; densities subtracted as importance
weights)::

    rand = Q_i(s, u) + A log 2                         u ~ U[-1, 1]^A
    curr = Q_i(s, a) - log pi(a|s)                     a ~ pi(.|s)      (no gradient into pi)
    next = Q_i(s, a') - log pi(a'|s')                  a' ~ pi(.|s')
    cql_i = T * logsumexp([rand, curr, next] / T) - Q_i(s, a_data)      (mean over the batch)
    critic loss += min_q_weight * sum_i cql_i

For the first ``bc_iters`` learner steps the actor imitates the data, ``alpha * log pi(a|s) -
log pi(a_data|s)`` (``a`` sampled), as RLlib's CQL starts; then it is SAC's actor. Reads
`CQLConfig`'s ``min_q_weight``, ``num_actions``, ``temperature`` and ``bc_iters``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import gymnasium as gym
import torch

from rlflow.algorithms.cql.config import CQLConfig
from rlflow.algorithms.sac.policy import LOG_STD_MAX, LOG_STD_MIN, SACPolicy, squashed_logp
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import ACTIONS, NEXT_OBS, OBS

__all__ = ["CQLPolicy"]

_UNIT_EDGE = 1.0 - 1e-6
"""Recorded actions at the Box's bounds are pulled this far inside [-1, 1] before atanh."""


class CQLPolicy(SACPolicy):
    """SAC plus the conservative term (module docstring). Stats add ``cql_loss`` (the term,
    weighted, summed over critics) and ``bc_phase`` (1 while the actor imitates)."""

    config: CQLConfig
    config_class: ClassVar[type[AlgorithmConfig]] = CQLConfig
    algo_name: ClassVar[str] = "CQL"

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: CQLConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build SAC's networks."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self._data_actions: torch.Tensor | None = None

    def _conservative(
        self, obs: torch.Tensor, next_obs: torch.Tensor, data_unit: torch.Tensor
    ) -> torch.Tensor:
        """The weighted conservative term, summed over the critics (module docstring)."""
        n, rows = self.config.num_actions, obs.shape[0]
        obs_n = obs.repeat_interleave(n, dim=0)
        with torch.no_grad():
            curr, curr_logp, _ = self.sample(obs_n)
            nxt, next_logp, _ = self.sample(next_obs.repeat_interleave(n, dim=0))
        uniform = torch.rand((rows * n, self.act_dim), generator=self.generator) * 2.0 - 1.0
        uniform = uniform.to(self.device)
        critics = len(self.net.critics)
        parts = [
            self.q_values(self.net, obs_n, uniform) + self.act_dim * math.log(2.0),
            self.q_values(self.net, obs_n, curr) - curr_logp,
            self.q_values(self.net, obs_n, nxt) - next_logp,
        ]
        stacked = torch.cat([p.reshape(critics, rows, n) for p in parts], dim=2)
        temperature = self.config.temperature
        logsumexp = torch.logsumexp(stacked / temperature, dim=2) * temperature
        data_q = self.q_values(self.net, obs, data_unit)
        return self.config.min_q_weight * (logsumexp - data_q).mean(dim=1).sum()

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """SAC's loss (its actor's replaced by imitation for ``bc_iters`` steps) plus the
        conservative term."""
        t = batch_tensors
        data_unit = self.to_unit(t[ACTIONS].float()).clamp(-_UNIT_EDGE, _UNIT_EDGE)
        self._data_actions = data_unit
        try:
            total, stats = super().loss(t)
        finally:
            self._data_actions = None
        cql = self._conservative(self.flat_obs(t[OBS]), self.flat_obs(t[NEXT_OBS]), data_unit)
        return total + cql, {**stats, "cql_loss": cql}

    def actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor | None, dict[str, Any]]:
        """SAC's actor and alpha losses, the actor's term imitating the recorded actions while
        fewer than ``bc_iters`` updates were made."""
        if self.update.num_grad_updates >= self.config.bc_iters or self._data_actions is None:
            loss, stats = super().actor_loss(obs)
            return loss, {**stats, "bc_phase": 0.0}
        _, logp, out = self.sample(obs)
        mean, log_std = out.chunk(2, dim=1)
        log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        data_logp = squashed_logp(torch.atanh(self._data_actions), mean, log_std)
        imitation = (self.log_alpha.exp().detach() * logp - data_logp).mean()
        total, stats = self.with_alpha_loss(imitation, logp)
        return total, {**stats, "bc_phase": 1.0}
