"""Policies with memory: the built-in recurrent actor-critic and the recurrent interface.

``model: {use_lstm: true}`` (or ``use_gru``) wraps the built-in trunk (the MLP of ``hidden``
and ``activation``, or the Nature CNN for images) with one LSTM (GRU) cell of
``lstm_cell_size`` units; the policy and value heads read the cell's output. With
``lstm_use_prev_action`` / ``lstm_use_prev_reward`` the previous action (one-hot for discrete
actions) and reward join the trunk's features at the cell's input. RLlib's keys and meanings.

A recurrent model, built in or custom (`rlflow.models.custom`), has this interface::

    def initial_state(self, batch_size):   # -> [tensor [B, ...], ...] (zeros, usually)
    def forward(self, obs, state, prev_actions=None, prev_rewards=None):
        # obs [B, T, *obs_shape], state as initial_state's, prev_actions [B, T, ...],
        # prev_rewards [B, T] -> (dist_inputs [B, T, D], value [B, T], state after step T)

Acting is the case ``T = 1`` (`TorchPolicy.compute_actions` with ``state=``). Learning runs the
model over the sequences of a batch (`TorchPolicy.model_outputs` on the layout of
`rlflow.data.sequences`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlflow.errors import ConfigError
from rlflow.models.actors import ActorExport, ExportableActor
from rlflow.models.distributions import ActionDistribution, DiagGaussian, dist_class_for
from rlflow.models.memory import RecurrentInputs
from rlflow.models.nets import MLP, NatureCNN, layer_init

__all__ = [
    "RecurrentActor",
    "RecurrentActorCritic",
    "StatefulActor",
    "is_recurrent",
]

_POLICY_GAIN = 0.01
_VALUE_GAIN = 1.0


def is_recurrent(model: nn.Module) -> bool:
    """Whether ``model`` carries state (it has an ``initial_state`` method)."""
    return callable(getattr(model, "initial_state", None))


class RecurrentActorCritic(nn.Module):
    """Trunk, then an LSTM or GRU cell, then the policy and value heads (one shared memory).

    Args:
        obs_space: ``Box`` (images: 3-D, through `NatureCNN`) or ``Discrete`` (one-hot).
        action_space: ``Discrete``, ``MultiDiscrete`` or a 1-D ``Box`` (`dist_class_for`).
        hidden: the layer sizes of the MLP trunk before the cell (``()``: the observation
            itself); images use the CNN instead.
        activation: the trunk's activation.
        cell: ``"lstm"`` (state ``[h, c]``) or ``"gru"`` (state ``[h]``).
        cell_size: the cell's units.
        use_prev_action: feed the previous action to the cell.
        use_prev_reward: feed the previous reward to the cell.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        hidden: tuple[int, ...] = (64,),
        activation: str = "tanh",
        cell: str = "lstm",
        cell_size: int = 256,
        use_prev_action: bool = False,
        use_prev_reward: bool = False,
    ) -> None:
        """Build the layers; `ConfigError` naming an unsupported space or cell."""
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ConfigError(f"RecurrentActorCritic: cell={cell!r} must be 'lstm' or 'gru'")
        dist_class = dist_class_for(action_space)
        dist_dim = dist_class.required_input_dim(action_space)
        gaussian = dist_class is DiagGaussian
        head_dim = dist_dim // 2 if gaussian else dist_dim
        self._one_hot = int(obs_space.n) if isinstance(obs_space, gym.spaces.Discrete) else 0
        self.is_image = isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 3
        shape = tuple(obs_space.shape or ())
        if self.is_image:
            self.trunk: nn.Module = NatureCNN(shape)
            width = 512
        elif isinstance(obs_space, gym.spaces.Box | gym.spaces.Discrete):
            in_features = self._one_hot or int(np.prod(shape))
            mlp = MLP(in_features, tuple(hidden), activation=activation)
            self.trunk, width = mlp, mlp.out_features
        else:
            raise ConfigError(
                f"Unsupported observation space {obs_space!r}: rlflow models take Box or "
                "Discrete observations. Flatten the env's observation space."
            )
        self._action_sizes: tuple[int, ...] = ()
        self._action_width = 0
        if use_prev_action:
            if isinstance(action_space, gym.spaces.Discrete):
                self._action_sizes = (int(action_space.n),)
            elif isinstance(action_space, gym.spaces.MultiDiscrete):
                self._action_sizes = tuple(int(n) for n in np.asarray(action_space.nvec).ravel())
            self._action_width = sum(self._action_sizes) or int(np.prod(action_space.shape or ()))
        self.use_prev_action = use_prev_action
        self.use_prev_reward = use_prev_reward
        cell_in = width + self._action_width + int(use_prev_reward)
        self.cell_type = cell
        self.cell_size = int(cell_size)
        self.cell: nn.LSTM | nn.GRU = (nn.LSTM if cell == "lstm" else nn.GRU)(
            cell_in, self.cell_size, batch_first=True
        )
        self.pi = layer_init(nn.Linear(self.cell_size, head_dim), _POLICY_GAIN)
        self.vf = layer_init(nn.Linear(self.cell_size, 1), _VALUE_GAIN)
        self.log_std = nn.Parameter(torch.zeros(head_dim)) if gaussian else None
        self.options: dict[str, Any] = {
            "hidden": [int(h) for h in hidden],
            "activation": activation,
            "cell": cell,
            "cell_size": self.cell_size,
            "use_prev_action": use_prev_action,
            "use_prev_reward": use_prev_reward,
        }
        """The constructor's keyword options, JSON-able (what an export records)."""

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        """Zeros: ``[h, c]`` (LSTM) or ``[h]`` (GRU), each ``[batch_size, cell_size]``."""
        device = self.pi.weight.device
        zeros = torch.zeros(batch_size, self.cell_size, device=device)
        return [zeros, zeros.clone()] if self.cell_type == "lstm" else [zeros]

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        """``[N, *obs_shape]`` observations to ``[N, width]`` trunk features."""
        if self.is_image:
            x = obs
        elif self._one_hot:
            x = F.one_hot(obs.long().reshape(-1), self._one_hot).float()
        else:
            x = obs.reshape(obs.shape[0], -1).float()
        out: torch.Tensor = self.trunk(x)
        return out

    def _prev_action_features(self, prev_actions: torch.Tensor, shape: tuple[int, int]) -> Any:
        if not self._action_sizes:  # a Box: the action itself
            return prev_actions.reshape(*shape, -1).float()
        columns = prev_actions.long().reshape(*shape, len(self._action_sizes))
        return torch.cat(
            [F.one_hot(columns[..., k], n).float() for k, n in enumerate(self._action_sizes)],
            dim=-1,
        )

    def _cell_step(self, x: torch.Tensor, state: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """One step of the cell with its own weights (``torch.lstm_cell`` / ``gru_cell``)."""
        cell = self.cell
        weights: list[torch.Tensor] = [
            getattr(cell, name)
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
        ]
        if self.cell_type == "lstm":
            h, c = torch.lstm_cell(x, (state[0], state[1]), *weights)
            return [h, c]
        return [torch.gru_cell(x, state[0], *weights)]

    def forward(
        self,
        obs: torch.Tensor,
        state: Sequence[torch.Tensor],
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """``(dist_inputs [B, T, D], value [B, T], state)`` for ``obs [B, T, *obs_shape]``
        from ``state`` (as :meth:`initial_state` gives); the previous actions ``[B, T, ...]``
        and rewards ``[B, T]`` are read when the model was built to use them."""
        # Sizes as the tensor gives them (not int()): an ONNX trace keeps the batch dynamic.
        b, t = obs.shape[0], obs.shape[1]
        x = self._features(obs.reshape(b * t, *obs.shape[2:])).reshape(b, t, -1)
        parts = [x]
        if self.use_prev_action:
            if prev_actions is None:
                raise ConfigError(
                    "RecurrentActorCritic: model.lstm_use_prev_action needs the previous actions "
                    "(compute_single_action(..., prev_action=...); 0 at an episode's start)"
                )
            parts.append(self._prev_action_features(prev_actions, (b, t)))
        if self.use_prev_reward:
            if prev_rewards is None:
                raise ConfigError(
                    "RecurrentActorCritic: model.lstm_use_prev_reward needs the previous rewards "
                    "(compute_single_action(..., prev_reward=...); 0 at an episode's start)"
                )
            parts.append(prev_rewards.reshape(b, t, 1).float())
        x = torch.cat(parts, dim=-1) if len(parts) > 1 else x
        if t == 1:  # one step (acting): the fused cell, 3x faster than the layer on CPU
            new_state = self._cell_step(x[:, 0], state)
            out = new_state[0][:, None]
        elif self.cell_type == "lstm":
            h, c = (s.unsqueeze(0).contiguous() for s in state)
            out, (h, c) = self.cell(x, (h, c))
            new_state = [h.squeeze(0), c.squeeze(0)]
        else:
            out, h = self.cell(x, state[0].unsqueeze(0).contiguous())
            new_state = [h.squeeze(0)]
        logits = self.pi(out)
        if self.log_std is not None:
            logits = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return logits, self.vf(out).squeeze(-1), new_state


class StatefulActor(ExportableActor):
    """An exported policy with memory (`rlflow.load_policy`): it acts one step at a time from
    its state (:meth:`act_with_state`); a plain :meth:`act` is refused. A subclass gives
    ``initial_state(batch_size)``, :meth:`network_step` and, if it acts otherwise than by its
    action distribution, :meth:`choose`."""

    dist_class: type[ActionDistribution]
    """The distribution the policy acted with."""

    def act(self, obs: torch.Tensor, *, explore: bool, generator: torch.Generator) -> torch.Tensor:
        """Refused: a policy with memory acts from its state (:meth:`act_with_state`)."""
        raise ConfigError(
            "a policy with memory acts from its state: LoadedPolicy.compute_single_action(obs, "
            "state=...) (state: get_initial_state() at an episode's start)"
        )

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        """The state at an episode's start, for ``batch_size`` observations."""
        raise NotImplementedError

    def network_step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        """The network on ``(obs [B, 1, ...], state, prev_actions, prev_rewards)``, as a policy
        calls it while sampling: ``(dist_inputs, value, state after the step)``."""
        raise NotImplementedError

    def choose(
        self, dist_inputs: torch.Tensor, *, explore: bool, generator: torch.Generator
    ) -> torch.Tensor:
        """The actions for ``dist_inputs [B, D]``: the mode, or a sample with ``explore``."""
        dist = self.dist_class(dist_inputs, generator=generator)
        actions: torch.Tensor = dist.sample() if explore else dist.deterministic()
        return actions

    def act_with_state(
        self,
        obs: torch.Tensor,
        memory: RecurrentInputs,
        *,
        explore: bool,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Actions ``[B, ...]`` for ``obs [B, ...]`` from ``memory`` (tensors; ``state`` None:
        the initial state) and the state after the step (:meth:`choose`)."""
        state = memory.state if memory.state is not None else self.initial_state(len(obs))
        prev_a, prev_r = memory.prev_actions, memory.prev_rewards
        dist_inputs, _, new_state = self.network_step(
            obs[:, None],
            list(state),
            None if prev_a is None else prev_a[:, None],
            None if prev_r is None else prev_r[:, None],
        )
        head = dist_inputs[:, 0].cpu()
        return self.choose(head, explore=explore, generator=generator), list(new_state)


class RecurrentActor(RecurrentActorCritic, StatefulActor):
    """The `RecurrentActorCritic` of a policy with memory, exported (`rlflow.load_policy`):
    it acts one step at a time from its state (`StatefulActor`); same options and parameter
    names as the policy's model, so its weights load as they are."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        epsilon: float | None = None,
        **options: Any,
    ) -> None:
        """Build the network as `RecurrentActorCritic` does (weights are loaded afterwards).
        With ``epsilon`` it is a Q network (R2D2's: its advantage head's argmax is the greedy
        action, dueling or not), exploring epsilon-greedily; else an actor-critic, exploring by
        sampling its action distribution."""
        options["hidden"] = tuple(int(h) for h in options.get("hidden", ()))
        super().__init__(observation_space, action_space, **options)
        self.dist_class = dist_class_for(action_space)
        self.epsilon = epsilon
        """A Q network's exploration rate (None: an actor-critic)."""

    def network_step(self, *inputs: Any) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        """The network itself."""
        return self.forward(*inputs)

    def choose(
        self, dist_inputs: torch.Tensor, *, explore: bool, generator: torch.Generator
    ) -> torch.Tensor:
        """A Q network's: epsilon-greedy; an actor-critic's: `StatefulActor.choose`."""
        if self.epsilon is None:
            return super().choose(dist_inputs, explore=explore, generator=generator)
        greedy = dist_inputs.argmax(dim=-1)
        if not explore:
            return greedy
        rows = greedy.shape[0]
        draw = torch.rand(rows, generator=generator) < self.epsilon
        random = torch.randint(dist_inputs.shape[-1], (rows,), generator=generator)
        return torch.where(draw, random, greedy)

    @staticmethod
    def export_of(model: RecurrentActorCritic, *, epsilon: float | None = None) -> ActorExport:
        """The export of a policy's built-in recurrent ``model``: its options and weights
        (``epsilon``: a Q network's exploration rate)."""
        weights = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
        options = dict(model.options)
        if epsilon is not None:
            options["epsilon"] = float(epsilon)
        return ActorExport(RecurrentActor, options, weights)
