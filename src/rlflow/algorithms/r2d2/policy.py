"""`R2D2Policy`: DQN's policy with a recurrent Q network, learning on replayed sequences.

Kapturowski et al., "Recurrent Experience Replay in Distributed Reinforcement Learning" (ICLR
2019). The Q network is `rlflow.models.recurrent.RecurrentActorCritic` (trunk, LSTM or GRU, two
heads): with ``dueling`` its value and advantage heads give ``Q = V + A - mean(A)``, else the
advantage head alone is Q. Acting is DQN's epsilon-greedy, one step at a time from each env's
recurrent state (the rollout worker carries it). Workers write sequences of
``replay_sequence_length`` steps, each closed by a bootstrap row (the observation after its last
step; `rlflow.data.sequences`); the replay buffer stores each as one item
(`rlflow.replay.SequenceReplayBuffer`). On a replayed sequence of ``n`` steps, from its stored
state, the first ``burn_in`` steps run without gradient, then, for every later step ``t < n``::

    m      = min(n_step, n - t)                              (steps to the bootstrap position)
    G_t    = sum_{k<m} gamma^k r_{t+k}
    target = h(G_t + gamma^m (1 - done) h^-1(Q_target(s_{t+m}, argmax_a Q(s_{t+m}, a))))
    loss   = importance weight * huber(Q(s_t, a_t) - target), averaged over the trained steps

where ``done`` is whether the episode ended at the sequence's last step and ``t + m`` reaches
it, ``s_n`` is the observation after the sequence, and ``h`` is the identity without
``use_h_function``. The stat `TD_ERROR` holds each sequence's new priority.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy.typing as npt
import torch
from torch import nn

from rlflow.algorithms.dqn.policy import DQNPolicy, huber
from rlflow.algorithms.r2d2.config import R2D2Config
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTIONS,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    REWARDS,
    SEQ_STEPS,
    SEQ_TERMINATED,
    TD_ERROR,
    WEIGHTS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport
from rlflow.models.custom import build_policy_model
from rlflow.models.masking import MASKED_LOGIT, ActionMaskedModel, legal_actions
from rlflow.models.memory import RecurrentInputs, stored_state
from rlflow.models.recurrent import RecurrentActor, RecurrentActorCritic

__all__ = ["R2D2Policy", "h_function", "h_inverse"]

Array = npt.NDArray[Any]


def h_function(x: torch.Tensor, eps: float) -> torch.Tensor:
    """R2D2's value rescaling ``sign(x) (sqrt(|x| + 1) - 1) + eps x``."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def h_inverse(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The inverse of :func:`h_function`."""
    inner = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (inner.pow(2) - 1.0)


class R2D2Policy(DQNPolicy):
    """DQN's policy with memory: recurrent Q network, sequence loss (module docstring)."""

    config: R2D2Config
    config_class: ClassVar[type[AlgorithmConfig]] = R2D2Config
    requires_next_obs: ClassVar[bool] = False
    requires_bootstrap_rows: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    @property
    def max_seq_len(self) -> int:
        """Steps per replayed sequence (``replay_sequence_length``): the rollout workers cut
        episodes into sequences of that many steps, each closed by a bootstrap row, and the
        buffer stores each as one item."""
        return self.config.replay_sequence_length

    def make_model(self) -> nn.Module:
        """The recurrent Q network: the built-in recurrent model (`rlflow.models.recurrent`)
        of the ``model`` options; its heads give Q (:meth:`_q`)."""
        return build_policy_model(self.observation_space, self.action_space, self.config.model)

    @property
    def h_epsilon(self) -> float | None:
        """The ``eps`` of the value rescaling ``h`` (``h_function_epsilon``); None: no
        rescaling (``use_h_function`` false)."""
        return self.config.h_function_epsilon if self.config.use_h_function else None

    def _q(self, advantages: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Q-values from the model's two heads (dueling) or its advantage head alone; with an
        action mask (`rlflow.models.masking`: illegal advantages come masked) the dueling mean
        is over the legal actions and illegal Q-values stay masked."""
        if not self.config.dueling:
            return advantages
        if not isinstance(self.model, ActionMaskedModel):
            return values.unsqueeze(-1) + advantages - advantages.mean(dim=-1, keepdim=True)
        legal = legal_actions(advantages)
        count = legal.sum(dim=-1, keepdim=True).clamp(min=1)
        mean = advantages.masked_fill(~legal, 0.0).sum(dim=-1, keepdim=True) / count
        return (values.unsqueeze(-1) + advantages - mean).masked_fill(~legal, MASKED_LOGIT)

    def _q_values(
        self, obs: npt.ArrayLike, memory: RecurrentInputs | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        advantages, values, state = self.model_step(obs, memory)
        return self._q(advantages, values).cpu(), state

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """The fragment's rows as they are (copied: the worker reuses its buffers); targets
        are computed on replayed sequences."""
        return batch.copy()

    # -- learning ---------------------------------------------------------------------------

    def _sequence_q(
        self,
        model: nn.Module,
        t: Mapping[str, torch.Tensor],
        state: Sequence[torch.Tensor],
        lo: int,
        hi: int,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Q-values ``[S, hi - lo, A]`` of ``model`` on positions ``[lo, hi)`` of the
        sequences from ``state``, and the state after them."""
        prev_a = t[PREV_ACTIONS][:, lo:hi] if PREV_ACTIONS in t else None
        prev_r = t[PREV_REWARDS][:, lo:hi] if PREV_REWARDS in t else None
        advantages, values, after = model(t[OBS][:, lo:hi], list(state), prev_a, prev_r)
        return self._q(advantages, values), list(after)

    def _sequence_td(self, t: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(td [S, L + 1 - burn_in], mask)``: each trained step's ``Q(s_t, a_t) - target``
        (gradient through Q only) and which steps are trained (module docstring)."""
        burn_in, width = self.config.burn_in, int(t[OBS].shape[1])
        state = stored_state(t)
        online_state, target_state = state, state
        if burn_in:
            with torch.no_grad():
                _, online_state = self._sequence_q(self.model, t, state, 0, burn_in)
                _, target_state = self._sequence_q(self.target_model, t, state, 0, burn_in)
        q, _ = self._sequence_q(self.model, t, online_state, burn_in, width)
        steps = t[SEQ_STEPS].long()
        positions = torch.arange(burn_in, width, device=q.device)  # [P]
        mask = positions[None, :] < steps[:, None]  # [S, P]
        actions = t[ACTIONS][:, burn_in:].long()
        q_taken = q.gather(2, actions.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            q_target, _ = self._sequence_q(self.target_model, t, target_state, burn_in, width)
            rewards = t[REWARDS].float()
            gamma, n_step = float(self.config.gamma), self.config.n_step
            returns = torch.zeros_like(q_taken)
            for k in range(n_step):  # G_t, rewards beyond the sequence's steps left out
                at = positions + k
                inside = at[None, :] < steps[:, None]
                reward = rewards.gather(1, at.clamp(max=width - 1).expand_as(returns))
                returns = returns + (gamma**k) * reward * inside
            m = (steps[:, None] - positions[None, :]).clamp(min=1, max=n_step)
            boot = (positions[None, :] + m).clamp(max=width - 1) - burn_in  # into q / q_target
            online_next = q.detach() if self.config.double_q else q_target
            best = online_next.gather(1, boot.unsqueeze(-1).expand(-1, -1, q.shape[2])).argmax(-1)
            q_boot = q_target.gather(1, boot.unsqueeze(-1).expand(-1, -1, q.shape[2]))
            q_boot = q_boot.gather(2, best.unsqueeze(-1)).squeeze(-1)
            done = t[SEQ_TERMINATED].bool()[:, None] & (positions[None, :] + m >= steps[:, None])
            if self.h_epsilon is not None:
                q_boot = h_inverse(q_boot, self.h_epsilon)
            target = returns + (gamma ** m.float()) * (~done).float() * q_boot
            if self.h_epsilon is not None:
                target = h_function(target, self.h_epsilon)
        return q_taken - target, mask

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """The importance-weighted Huber loss over every trained step of the replayed
        sequences; stats: ``mean_td_error`` and each sequence's new priority (`TD_ERROR`)."""
        td, mask = self._sequence_td(batch_tensors)
        maskf = mask.float()
        per_step = huber(td, self.config.huber_delta) * maskf
        weights = batch_tensors.get(WEIGHTS)
        if weights is not None:
            per_step = per_step * weights.float()[:, None]
        total = per_step.sum() / maskf.sum().clamp(min=1.0)
        with torch.no_grad():
            abs_td = td.abs() * maskf
            trained = maskf.sum(dim=1).clamp(min=1.0)
            eta = self.config.priority_eta
            priority = eta * abs_td.max(dim=1).values + (1 - eta) * abs_td.sum(dim=1) / trained
        stats = {"mean_td_error": abs_td.sum() / maskf.sum().clamp(min=1.0), TD_ERROR: priority}
        return total, stats

    def export_model(self) -> ActorExport:
        """The recurrent Q network as a `RecurrentActor` with DQN's ``final_epsilon``: greedy
        actions are the argmax of its advantage head (Q's, dueling or not)."""
        model = self.model
        if isinstance(model, ActionMaskedModel):
            raise ConfigError(
                "cannot export a policy with action masks yet; act with "
                "Trainer.compute_single_action instead"
            )
        assert isinstance(model, RecurrentActorCritic)
        return RecurrentActor.export_of(model, epsilon=self.config.final_epsilon)
