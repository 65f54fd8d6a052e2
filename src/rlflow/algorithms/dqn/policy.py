"""`DQNPolicy`: deep Q-learning with double Q, dueling heads, n-step targets, PER weights.

Mnih et al., "Human-level control through deep reinforcement learning" (2015); van Hasselt et
al., "Deep Reinforcement Learning with Double Q-learning" (2016); Wang et al., "Dueling Network
Architectures" (2016); Schaul et al., "Prioritized Experience Replay" (2016); Horgan et al.,
"Distributed Prioritized Experience Replay" (Ape-X, 2018). For a replayed n-step transition
``(s, a, R, s', d, gamma^m)``::

    a*      = argmax_a' Q(s', a')                    (double Q; else argmax of Q_target)
    target  = R + gamma^m * (1 - d) * Q_target(s', a*)
    td      = Q(s, a) - target
    loss    = mean(w * huber(td))                    (w: importance weights, 1 without PER)

``R`` and ``gamma^m`` (the `DISCOUNTS` column) come from :meth:`DQNPolicy.postprocess_trajectory`
(m = n steps, fewer at an episode's end; :func:`rlflow.replay.n_step_transitions`). Acting is
epsilon-greedy: epsilon falls linearly from ``initial_epsilon`` to ``final_epsilon`` over
``epsilon_timesteps`` env steps of the global timestep (pushed with the weights:
``set_weights(w, global_vars={"timestep": t})``), or, with ``per_worker_exploration``, is
fixed per worker as in Ape-X: ``eps_i = worker_epsilon ** (1 + worker_epsilon_alpha * i /
(N - 1))`` for worker i = 0..N-1 of N (``worker_index`` 1..N, a constructor argument).

Reads `DQNConfig`'s ``n_step``, ``double_q``, ``dueling``, ``huber_delta``, the epsilon
schedule and per-worker exploration, ``worker_side_prioritization``,
``prioritized_replay_eps`` and ``num_workers`` besides the shared settings. Ape-X uses this
policy too (through the registry; `ApexConfig` extends `DQNConfig`). ``model`` options default
to ``hidden`` (64, 64) and ``activation`` "relu".
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlflow.algorithms.dqn.actor import QActor, QNetwork
from rlflow.algorithms.dqn.config import DQNConfig
from rlflow.config import AlgorithmConfig
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    ACTIONS,
    LOGP,
    NEXT_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport
from rlflow.models.masking import (
    ActionMaskedModel,
    MaskedActor,
    legal_actions,
    masked_network,
)
from rlflow.models.memory import RecurrentInputs, state_out_key
from rlflow.ops.keys import TD_ERROR
from rlflow.policy.policy import TorchPolicy
from rlflow.replay import DISCOUNTS, WEIGHTS, n_step_transitions

__all__ = ["DQNPolicy", "huber"]

Array = npt.NDArray[Any]


def huber(x: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Elementwise Huber loss: ``x^2 / 2`` for ``|x| <= delta``, else ``delta (|x| - delta/2)``.

    >>> huber(torch.tensor([0.5, -3.0])).tolist()
    [0.125, 2.5]
    """
    abs_x = x.abs()
    return torch.where(abs_x <= delta, 0.5 * x.pow(2), delta * (abs_x - 0.5 * delta))


class DQNPolicy(TorchPolicy):
    """DQN policy: Q network, target network, epsilon-greedy acting, n-step double-Q loss.

    Acting (:meth:`compute_actions`) writes the Q-values as `ACTION_DIST_INPUTS` and max Q as
    `VF_PREDS`. :meth:`postprocess_trajectory` makes n-step transitions. The loss's stats hold
    `TD_ERROR` (per row; `PolicyUpdate.learn_on_batch` adds a replayed batch's `BATCH_INDEXES`),
    for priority updates. :meth:`update_target` copies Q into the target.
    Weights (:meth:`get_weights`) are the Q network's only; :meth:`get_state` adds the target.
    """

    config: DQNConfig
    config_class: ClassVar[type[AlgorithmConfig]] = DQNConfig
    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)
    action_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Discrete,)
    requires_next_obs: ClassVar[bool] = True

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: DQNConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build the Q network (`make_model`) and its target; fix Ape-X's per-worker epsilon."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.fixed_epsilon = self._per_worker_epsilon(config)
        """Ape-X's fixed epsilon of this worker, or None to follow the schedule."""
        self.target_model: nn.Module = copy.deepcopy(self.model).requires_grad_(False)
        """The target network, updated by :meth:`update_target`."""
        self.global_timestep = 0
        """Last timestep pushed with the weights (env steps sampled by all workers)."""
        self._acted_since_push = 0

    @property
    def num_actions(self) -> int:
        """The number of discrete actions (the Q network's outputs)."""
        return int(self.action_space.n)  # type: ignore[attr-defined]

    def make_model(self) -> nn.Module:
        """The `QNetwork` from ``hidden``, ``activation`` and ``dueling`` (masked when the
        observations carry an action mask: `rlflow.models.masking`)."""
        model_cfg = self.config.model

        def build(space: gym.Space[Any]) -> QNetwork:
            return QNetwork(
                space,
                self.num_actions,
                hidden=model_cfg.hidden,
                activation=model_cfg.activation,
                dueling=self.config.dueling,
            )

        where = f"{type(self).__name__}'s Q network"
        return masked_network(build, self.observation_space, self.action_space, model_cfg, where)

    def _per_worker_epsilon(self, config: DQNConfig) -> float | None:
        if not config.per_worker_exploration or self.worker_index < 1:
            return None
        num_workers = max(1, config.num_workers)
        frac = (self.worker_index - 1) / (num_workers - 1) if num_workers > 1 else 0.0
        return float(config.worker_epsilon ** (1.0 + config.worker_epsilon_alpha * frac))

    # -- exploration ------------------------------------------------------------------------

    @property
    def timestep(self) -> int:
        """The global timestep: the last one pushed plus the env steps acted on since."""
        return self.global_timestep + self._acted_since_push

    def on_global_var_update(self, global_vars: Mapping[str, Any]) -> None:
        """Take the global ``timestep`` pushed with the weights (drives the epsilon schedule)."""
        super().on_global_var_update(global_vars)
        if "timestep" in global_vars:
            self.global_timestep = int(global_vars["timestep"])
            self._acted_since_push = 0

    def epsilon(self) -> float:
        """The current exploration rate (see the module docstring)."""
        if self.fixed_epsilon is not None:
            return self.fixed_epsilon
        config = self.config
        if config.epsilon_timesteps == 0:
            return config.final_epsilon
        frac = min(1.0, self.timestep / config.epsilon_timesteps)
        return config.initial_epsilon + frac * (config.final_epsilon - config.initial_epsilon)

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True, memory: RecurrentInputs | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """Epsilon-greedy actions (greedy with ``explore=False``) for a batch of observations.

        Extra columns: `ACTION_DIST_INPUTS` = Q-values ``[B, A]``, `VF_PREDS` = max Q, `LOGP`
        = 0. Exploring counts the ``B`` env steps towards :attr:`timestep`.
        """
        with torch.no_grad():
            q, state_out = self._q_values(obs, memory)
        actions = q.argmax(dim=1)
        if explore:
            size = actions.shape[0]
            explore_mask = torch.rand(size, generator=self.generator) < self.epsilon()
            if isinstance(self.model, ActionMaskedModel):  # uniform over the legal ones
                legal = legal_actions(q).float()
                random_actions = torch.multinomial(legal, 1, generator=self.generator)[:, 0]
            else:
                random_actions = torch.randint(
                    self.num_actions, (size,), generator=self.generator, dtype=actions.dtype
                )
            actions = torch.where(explore_mask, random_actions, actions)
            self._acted_since_push += size
        q_np = q.numpy()
        extra = {
            LOGP: np.zeros(len(q_np), dtype=np.float32),
            VF_PREDS: q_np.max(axis=1),
            ACTION_DIST_INPUTS: q_np,
        }
        for k, tensor in enumerate(state_out):
            extra[state_out_key(k)] = tensor.cpu().numpy()
        return actions.numpy(), extra

    def _q_values(
        self, obs: npt.ArrayLike, memory: RecurrentInputs | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Q-values ``[B, A]`` on the host for a batch of observations, and the state after
        the step (``[]``: the Q network has no memory; R2D2's has)."""
        return self.model(self.obs_to_tensor(obs)).cpu(), []

    def value(self, obs: npt.ArrayLike, *, memory: RecurrentInputs | None = None) -> Array:
        """Return max_a Q(s, a) ``[B]``, without gradients."""
        with torch.no_grad():
            q, _ = self._q_values(obs, memory)
        return q.max(dim=1).values.numpy()

    # -- experience -------------------------------------------------------------------------

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Turn one episode fragment into n-step transitions (``last_value`` is unused).

        Row t gets ``REWARDS = sum_{k<m} gamma^k r_{t+k}``, ``NEXT_OBS`` and ``TERMINATEDS`` of
        row ``t + m - 1`` and ``DISCOUNTS = gamma^m`` with ``m = min(n_step, rows left)``
        (:func:`rlflow.returns.n_step_targets`). Keeps only OBS, ACTIONS, REWARDS, NEXT_OBS,
        TERMINATEDS, DISCOUNTS; with ``worker_side_prioritization`` adds `WEIGHTS` = |TD
        error| + ``prioritized_replay_eps`` of each transition under this worker's network
        (Ape-X's initial priorities).
        """
        missing = [c for c in (OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS) if c not in batch]
        if missing:
            raise ConfigError(
                f"DQNPolicy.postprocess_trajectory: batch lacks {missing}; columns are "
                f"{sorted(batch)} (rollout workers add NEXT_OBS for this policy)"
            )
        kept = SampleBatch({c: batch[c] for c in (OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS)})
        steps = n_step_transitions(kept, n=self.config.n_step, gamma=self.config.gamma)
        out = SampleBatch(
            {
                OBS: batch[OBS].copy(),  # the worker reuses its rollout buffers
                ACTIONS: batch[ACTIONS].copy(),
                REWARDS: steps[REWARDS].astype(np.float32),
                NEXT_OBS: steps[NEXT_OBS],
                TERMINATEDS: steps[TERMINATEDS],
                DISCOUNTS: steps[DISCOUNTS],
            }
        )
        if self.config.worker_side_prioritization and out.count:
            with torch.no_grad():
                td = self._td_error(self.update.batch_to_tensors(out), target_net=self.model)
            eps = self.config.prioritized_replay_eps
            out[WEIGHTS] = (np.abs(td.cpu().numpy()) + eps).astype(np.float32)
        return out

    # -- learning ---------------------------------------------------------------------------

    def _td_error(self, t: dict[str, torch.Tensor], *, target_net: nn.Module) -> torch.Tensor:
        """``Q(s, a) - target`` per row (grad flows through Q(s, a) only)."""
        q = self.model(t[OBS])
        q_taken = q.gather(1, t[ACTIONS].long().reshape(-1, 1)).squeeze(1)
        with torch.no_grad():
            q_next_target = target_net(t[NEXT_OBS])
            if self.config.double_q:
                best = self.model(t[NEXT_OBS]).argmax(dim=1, keepdim=True)
            else:
                best = q_next_target.argmax(dim=1, keepdim=True)
            q_next = q_next_target.gather(1, best).squeeze(1)
            not_done = 1.0 - t[TERMINATEDS].float()
            target = t[REWARDS] + t[DISCOUNTS] * not_done * q_next
        td: torch.Tensor = q_taken - target
        return td

    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the importance-weighted Huber TD loss and its stats (see module docstring)."""
        td = self._td_error(batch_tensors, target_net=self.target_model)
        weights = batch_tensors.get(WEIGHTS)
        per_row = huber(td, self.config.huber_delta)
        if weights is not None:
            per_row = per_row * weights.float()
        total = per_row.mean()
        return total, {"mean_td_error": td.abs().mean(), TD_ERROR: td}

    def export_model(self) -> ActorExport:
        """The Q network as a `QActor` (`rlflow.export` writes it): its model options,
        ``dueling``, ``final_epsilon`` for exploring, and :meth:`get_weights`."""
        model_cfg = self.config.model
        network = self.model
        weights = self.get_weights()
        if isinstance(network, ActionMaskedModel):  # the Q network's actor, masked
            network = network.model
            weights = {k.removeprefix("model."): v for k, v in weights.items()}
        options = {
            "hidden": list(model_cfg.hidden),
            "activation": model_cfg.activation,
            "dueling": network.dueling,
            "epsilon": self.config.final_epsilon,
        }
        export = ActorExport(QActor, options, weights)
        if isinstance(self.model, ActionMaskedModel):
            return MaskedActor.export_of(export, self.model)
        return export

    def update_target(self) -> None:
        """Copy the Q network's weights into the target network."""
        self.target_model.load_state_dict(self.model.state_dict())

    # -- state ------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """The base snapshot plus the target network and the timestep."""
        target = {k: v.cpu().numpy().copy() for k, v in self.target_model.state_dict().items()}
        return {
            **super().get_state(),
            "target_weights": target,
            "global_timestep": self.global_timestep,
            "acted_since_push": self._acted_since_push,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`."""
        super().set_state(state)
        target = {k: torch.as_tensor(np.array(v)) for k, v in state["target_weights"].items()}
        self.target_model.load_state_dict(target)
        self.global_timestep = int(state["global_timestep"])
        self._acted_since_push = int(state["acted_since_push"])
