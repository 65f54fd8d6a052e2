"""`TorchPolicy`: the torch policy base every algorithm's policy extends.

A policy owns one model (an :class:`~rlflow.models.ActorCritic`, or the config's
``model.custom_model``: `rlflow.models.custom`), a private ``torch.Generator`` for action
sampling, and its update (:attr:`TorchPolicy.update`, a `rlflow.learner.PolicyUpdate`: the
optimizer, the learning steps, the non-finite guard and the update counters). The spaces and
models a policy class takes are in its ``observation_space_types``, ``action_space_types`` and
``supports_custom_model``, checked first by `rlflow.policy.spaces.check_policy_spaces`.
Subclasses write :meth:`TorchPolicy.loss` (and, when needed,
:meth:`TorchPolicy.postprocess_trajectory`) and may give named hooks: :meth:`TorchPolicy.
make_model` (their network), :meth:`TorchPolicy.make_update` (the optimizer's parameter groups,
parameters a step may leave alone). What a policy does itself:

- acting: :meth:`~TorchPolicy.compute_actions`, :meth:`~TorchPolicy.value` (batched, no grad;
  a model with memory takes and returns its state: :meth:`~TorchPolicy.initial_state`);
- the model's outputs a loss reads: :meth:`~TorchPolicy.model_outputs` (a model with memory
  run over the batch's whole sequences, `rlflow.data.sequences`);
- state: :meth:`~TorchPolicy.get_weights` / :meth:`~TorchPolicy.set_weights` (model only, plain
  numpy) and :meth:`~TorchPolicy.get_state` / :meth:`~TorchPolicy.set_state` (weights, the
  update's optimizer and counters, the RNG, for checkpoints).

Learning goes through the update: ``policy.update.learn_on_batch(batch)``,
``learn_on_minibatches``, ``compute_gradients`` / ``apply_gradients``.

A policy takes its algorithm's typed config (an instance of its ``config_class``) and reads its
attributes where it needs them (``self.config.gamma``): every default and every rule is in the
config class, none here; what changes while training (an adaptive KL coefficient, a scheduled
entropy weight) is the policy's state. The base reads `AlgorithmConfig`'s ``gamma``, ``model``
(a `rlflow.config.model.ModelConfig`: the built-in network's options, or a custom model) and
``num_torch_threads`` (applied with ``torch.set_num_threads``, process-wide); its update reads
``lr``, ``lr_schedule``, ``grad_clip`` and ``max_nonfinite_updates``. Runtime facts (the spaces,
the seed, the worker's index) are constructor arguments. Each algorithm's policy lives in its
package (``rlflow.algorithms.<name>.policy``); this package keeps the base and the pieces
several algorithms share.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlflow.checks import check_int, check_type
from rlflow.config import DEFAULT_POLICY_ID, ActorCriticConfig, AlgorithmConfig
from rlflow.config.resources import resolve_device
from rlflow.data.sample_batch import (
    ACTION_DIST_INPUTS,
    LOGP,
    OBS,
    PREV_ACTIONS,
    PREV_REWARDS,
    VF_PREDS,
    SampleBatch,
)
from rlflow.data.sequences import LayoutTensors
from rlflow.envs.nonfinite import all_finite, finite_array
from rlflow.errors import ConfigError, NonFiniteError
from rlflow.learner import PolicyUpdate
from rlflow.models import ActionDistribution, dist_class_for
from rlflow.models.actors import ActorExport
from rlflow.models.custom import build_policy_model, export_policy_model
from rlflow.models.memory import (
    AnyMemory,
    Memory,
    MemoryRow,
    NoMemory,
    RecurrentInputs,
    no_previous_action,
    state_out_key,
    stored_state,
)
from rlflow.models.recurrent import is_recurrent
from rlflow.policy.spaces import check_custom_model_support, check_policy_spaces
from rlflow.returns import compute_advantages

__all__ = [
    "ActorCriticPolicy",
    "TorchPolicy",
    "adaptive_kl_coeff",
    "weights_to_host",
]

Array = npt.NDArray[Any]


class TorchPolicy(abc.ABC):
    """Base class of torch policies: model, acting, the loss's inputs, weights and state.

    Args:
        observation_space: the env's observation space.
        action_space: the env's action space (``Discrete``, ``MultiDiscrete`` or 1-D ``Box``;
            what a subclass takes is in ``observation_space_types`` and ``action_space_types``).
        config: the algorithm's config, an instance of this class's ``config_class``
            (`rlflow.config.PolicySpec.policy_config` makes one from a run's config and a
            policy's overrides).
        seed: seeds the model initialisation and the sampling generator; ``None`` draws
            fresh entropy. Torch's global RNG is left as it was.
        worker_index: the index of the rollout worker that holds the policy (0: the learner).
    """

    config_class: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    """The config class this policy reads (an algorithm's, or a base several share)."""

    observation_space_types: ClassVar[tuple[type, ...]] = (gym.spaces.Box, gym.spaces.Discrete)
    """The observation spaces the policy takes (`rlflow.policy.spaces.check_policy_spaces`)."""
    action_space_types: ClassVar[tuple[type, ...]] = (
        gym.spaces.Discrete,
        gym.spaces.MultiDiscrete,
        gym.spaces.Box,
    )
    """The action spaces the policy takes (1-D Box: `rlflow.models.dist_class_for`)."""
    supports_custom_model: ClassVar[bool] = False
    """Whether ``model.custom_model`` may replace the network (`rlflow.models.custom`)."""
    supports_recurrent: ClassVar[bool] = False
    """Whether the model may carry state (``model.use_lstm`` / ``use_gru``, or a recurrent
    custom model: `rlflow.models.recurrent`): the loss reads the model's outputs through
    :meth:`model_outputs`, which runs it over whole sequences."""
    requires_next_obs: ClassVar[bool] = False
    """Rollout workers store `NEXT_OBS` with every row (replay-based policies)."""
    requires_bootstrap_rows: ClassVar[bool] = False
    """Rollout workers close every sequence with a bootstrap row (V-trace, R2D2:
    `rlflow.data.sequences`)."""

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: AlgorithmConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build the model and the update from ``config``; see the class docstring."""
        name = type(self).__name__
        cls = self.config_class
        check_type(config, f"{name}(config)", cls, f"a {cls.__name__}")
        check_policy_spaces(type(self), observation_space, action_space)
        check_custom_model_support(type(self), config.model)
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        """The typed config this policy was built with."""
        self.worker_index = check_int(worker_index, f"{name}(worker_index)", low=0)
        """The index of the rollout worker holding this policy (0: the learner)."""
        self.policy_id: str = DEFAULT_POLICY_ID
        """The policy's id in its worker's policy map (set by the `RolloutWorker` that holds
        it), for messages."""
        if torch.get_num_threads() != config.num_torch_threads:
            torch.set_num_threads(config.num_torch_threads)
        self.dist_class: type[ActionDistribution] = dist_class_for(action_space)
        """The action distribution class that reads the model's ``dist_inputs``."""
        self.generator = torch.Generator()
        """Private RNG for action sampling (seeded from ``seed``; on CPU: actions are drawn on
        CPU from the model's outputs, wherever the model runs)."""
        self.device: torch.device = resolve_device(config, self.worker_index)
        """Where the model runs and learns: ``cuda`` for the learner with ``num_gpus > 0`` (a
        worker with ``num_gpus_per_worker > 0``), else ``cpu``."""
        model_config = config.model
        if (model_config.use_lstm or model_config.use_gru) and not self.supports_recurrent:
            raise ConfigError(self._no_memory_message("model.use_lstm/use_gru"))
        with torch.random.fork_rng(devices=[]):  # seeded, torch's own RNG left as it was
            if seed is None:
                self.generator.seed()
            else:
                torch.manual_seed(seed)
                self.generator.manual_seed(seed)
            model = self.make_model()
        self.model: nn.Module = model.to(self.device)
        """The network (`make_model`): ``forward(obs) -> (dist_inputs, value)`` and
        ``value(obs)`` (an `ActorCritic`, or the ``model.custom_model``); a recurrent one
        (`rlflow.models.recurrent`) takes and returns state."""
        self.recurrent = is_recurrent(self.model)
        """Whether the model carries state: acting takes and returns it (`compute_actions`
        with ``memory=``), learning runs whole sequences (`model_outputs`)."""
        if self.recurrent and not self.supports_recurrent:
            raise ConfigError(self._no_memory_message("a recurrent model.custom_model"))
        self.update: PolicyUpdate = self.make_update()
        """How this policy learns (`make_update`): the optimizer, the steps on batches, the
        non-finite guard and the counters (`rlflow.learner.PolicyUpdate`)."""

    def _no_memory_message(self, what: str) -> str:
        return (
            f"{what}: {type(self).__name__} does not train policies with memory (yet); "
            "recurrent models fit PG, A2C, A3C, PPO, IMPALA, APPO and R2D2 "
            "(rlflow.models.recurrent)"
        )

    @classmethod
    def check_env(cls, env: Any, name: str) -> None:
        """Refuse an env this policy class cannot act in beyond what its spaces say, with a
        `ConfigError` (a hook: AlphaZero refuses a game its search cannot copy). Called on the
        learner's rollout worker, before any actor starts, with a probe env built from the
        config (``name``: the config's env, for messages), which it may reset and step. Here:
        any env is accepted."""
        return None  # a hook: nothing to refuse here

    def make_model(self) -> nn.Module:
        """The policy's network, built once under the policy's seed (a hook: DQN builds its Q
        network, SAC and TD3 their actor and critics). Here: `rlflow.models.custom.
        build_policy_model` (the custom model, a recurrent actor-critic, or an `ActorCritic`)."""
        return build_policy_model(self.observation_space, self.action_space, self.config.model)

    def make_update(self) -> PolicyUpdate:
        """The policy's update, built once after the model (a hook: twin-Q gives parameter
        groups with their own learning rates). Here: one group of the model's trainable
        parameters at ``lr``."""
        return PolicyUpdate(self, [p for p in self.model.parameters() if p.requires_grad])

    @property
    def max_seq_len(self) -> int:
        """The longest sequence a policy with memory learns on (``model.max_seq_len``): the
        rollout workers cut episodes into sequences of at most this many steps."""
        return self.config.model.max_seq_len

    @property
    def use_critic(self) -> bool:
        """Whether postprocessing bootstraps from V(s_T) (workers compute it only then); no
        critic here (`ActorCriticPolicy` reads ``use_critic``)."""
        return False

    def on_global_var_update(self, global_vars: Mapping[str, Any]) -> None:
        """Take the values pushed with the weights (the ``lr_schedule`` follows the global
        ``timestep``: `PolicyUpdate.on_global_vars`); subclasses extend, calling super."""
        self.update.on_global_vars(global_vars)

    def export_model(self) -> ActorExport:
        """The policy's actor for `rlflow.export`: its `ActorCritic` as `ActorCriticActor`, a
        custom model as `rlflow.models.custom.CustomModelActor`."""
        return export_policy_model(
            self.model, self.observation_space, self.action_space, self.config.model
        )

    # -- acting -----------------------------------------------------------------------------

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (on CPU) on the policy's device: through pinned memory, non-blocking."""
        if self.device.type == "cpu":
            return tensor
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def obs_to_tensor(self, obs: npt.ArrayLike) -> torch.Tensor:
        """Convert a batch of observations to a tensor on the policy's device (float64 becomes
        float32, uint8 stays)."""
        array = np.ascontiguousarray(obs)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        return self._to_device(torch.from_numpy(array))

    def compute_actions(
        self,
        obs: npt.ArrayLike,
        *,
        explore: bool = True,
        memory: RecurrentInputs | None = None,
    ) -> tuple[Array, dict[str, Array]]:
        """Return actions for a batch of observations ``[B, *obs_shape]``, without gradients.

        ``explore=True`` samples from the distribution (using this policy's generator),
        ``False`` takes its mode. The extra dict holds the columns a rollout stores:
        `LOGP` ``[B]``, `VF_PREDS` ``[B]`` and `ACTION_DIST_INPUTS` ``[B, input_dim]``.
        ``Box`` actions are not clipped to the space; the env side clips. Outputs that are NaN
        or infinite (weights that diverged) are a `NonFiniteError` saying so.

        A recurrent policy (`recurrent`) acts from ``memory``
        (`rlflow.models.memory.RecurrentInputs`: its state as :meth:`initial_state` gives
        it, one row per observation, and the previous actions and rewards when its model reads
        them; None: the initial state), and the extra dict also holds the state after the
        step: ``"state_out_0"``, ``"state_out_1"``... ``[B, ...]``. Policies without memory
        ignore ``memory``.
        """
        with torch.inference_mode():
            dist_inputs, values, state_out = self.model_step(obs, memory)
            dist_inputs, values = dist_inputs.cpu(), values.cpu()
            try:
                dist = self.dist_class(dist_inputs, generator=self.generator)
                actions = dist.sample() if explore else dist.deterministic()
                logp = dist.logp(actions)
            except (RuntimeError, ValueError) as err:  # torch's, on NaN or inf probabilities
                if all_finite(dist_inputs.numpy()):
                    raise
                raise NonFiniteError(self._nonfinite_outputs_message(obs)) from err
        if actions.dtype.is_floating_point and not finite_array(actions.numpy()):
            raise NonFiniteError(self._nonfinite_outputs_message(obs))
        extra = {
            LOGP: logp.numpy(),
            VF_PREDS: values.numpy(),
            ACTION_DIST_INPUTS: dist_inputs.numpy(),
        }
        for k, tensor in enumerate(state_out):
            extra[state_out_key(k)] = tensor.cpu().numpy()
        return actions.numpy(), extra

    def action_logp(self, dist_inputs: npt.ArrayLike, actions: npt.ArrayLike) -> Array:
        """The log-likelihoods ``[B]`` of ``actions`` under the action distributions of
        ``dist_inputs`` ``[B, input_dim]`` (as `compute_actions` returns them): for actions
        this policy did not choose (an external client's, `rlflow.serve`)."""
        with torch.inference_mode():
            dist = self.dist_class(torch.as_tensor(np.asarray(dist_inputs)))
            return dist.logp(torch.as_tensor(np.asarray(actions))).numpy()

    def initial_state(self, batch_size: int) -> list[Array]:
        """A recurrent model's initial state for ``batch_size`` rows, as numpy arrays (what
        `compute_actions` takes as ``state``); ``[]`` for a feed-forward one."""
        if not self.recurrent:
            return []
        with torch.inference_mode():
            tensors = self.model.initial_state(batch_size)  # type: ignore[operator]
        return [t.cpu().numpy().astype(np.float32) for t in tensors]

    def memory(self, rows: int) -> AnyMemory:
        """What the samplers carry between this policy's steps for ``rows`` sub-envs or agents
        (`rlflow.models.memory`): a `Memory` of the model's state, previous action and reward,
        which cuts episodes into sequences of ``max_seq_len``; a `NoMemory` without memory."""
        if not self.recurrent:
            return NoMemory()
        state = [s[0] for s in self.initial_state(1)]
        initial = MemoryRow(state, no_previous_action(self.action_space), 0.0)
        return Memory(initial, rows, max_seq_len=self.max_seq_len)

    def model_step(
        self, obs: npt.ArrayLike, memory: RecurrentInputs | None
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One step of the model for a batch of observations, as acting runs it (no gradients
        asked): ``(dist_inputs [B, D], value [B], state after the step)``; a model with memory
        steps from ``memory`` (None: its initial state), one without returns no state."""
        obs_t = self.obs_to_tensor(obs)
        if not self.recurrent:
            dist_inputs, values = self.model(obs_t)
            return dist_inputs, values, []
        state, prev_actions, prev_rewards = memory or RecurrentInputs()
        rows = int(obs_t.shape[0])
        arrays = self.initial_state(rows) if state is None else state
        state_t = [self._to_device(torch.as_tensor(np.asarray(a, np.float32))) for a in arrays]
        prev_a = prev_r = None
        if prev_actions is not None:
            prev_a = self._to_device(torch.as_tensor(np.asarray(prev_actions)))[:, None]
        if prev_rewards is not None:
            prev_r = self._to_device(torch.as_tensor(np.asarray(prev_rewards, np.float32)))[:, None]
        dist_inputs, values, new_state = self.model(obs_t[:, None], state_t, prev_a, prev_r)
        return dist_inputs[:, 0], values[:, 0], list(new_state)

    def model_outputs(
        self, tensors: Mapping[str, torch.Tensor], model: nn.Module | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(dist_inputs [N, D], value [N])`` of the model (or ``model``, one of the same
        shape: a target network) for the ``N`` rows of a batch's tensors (what a loss reads):
        ``model(obs)``; a recurrent model runs over the batch's whole sequences (the layout sent
        with the tensors, `rlflow.data.sequences`), each from the state stored with its first
        row, the padding's outputs dropped: one output per row, as from a feed-forward model."""
        model = self.model if model is None else model
        if not self.recurrent:
            dist_inputs, values = model(tensors[OBS])
            return dist_inputs, values
        layout = LayoutTensors.of(tensors)
        if layout is None:
            raise ConfigError(
                f"{type(self).__name__}: a model with memory learns on sequence batches (column "
                "'seq_start', written by the rollout workers; rlflow.data.sequences)"
            )
        index = layout.row_index
        state = [s[layout.starts] for s in stored_state(tensors)]
        prev_actions = tensors[PREV_ACTIONS][index] if PREV_ACTIONS in tensors else None
        prev_rewards = tensors[PREV_REWARDS][index] if PREV_REWARDS in tensors else None
        dist_inputs, values, _ = model(tensors[OBS][index], state, prev_actions, prev_rewards)
        # Row-major over [sequence, row]: the outputs in the batch's own row order.
        return dist_inputs[layout.row_mask], values[layout.row_mask]

    def _nonfinite_outputs_message(self, obs: npt.ArrayLike) -> str:
        """Why the model's action-distribution inputs on ``obs`` were NaN or infinite."""
        where = f"policy {self.policy_id!r} ({type(self).__name__}, worker {self.worker_index})"
        if not all_finite(obs):
            return (
                f"{where}: an observation it acted on is NaN or infinite, so are the model's "
                "outputs; see on_nonfinite (the samplers check env observations)"
            )
        largest = max(float(p.detach().abs().max()) for p in self.model.parameters())
        return (
            f"{where}: the model's action-distribution inputs are NaN or infinite on finite "
            f"observations; its weights have diverged (largest |weight| {largest:.3g}): lower "
            f"lr (it is {self.update.lr}), set grad_clip (it is {self.config.grad_clip}), or "
            "check the rewards' scale"
        )

    def value(self, obs: npt.ArrayLike, *, memory: RecurrentInputs | None = None) -> Array:
        """Return the value estimates ``[B]`` for a batch of observations, without gradients
        (a recurrent policy: from ``memory``, as in `compute_actions`)."""
        with torch.inference_mode():
            _, values, _ = self.model_step(obs, memory)
        return values.cpu().numpy()

    def gae_parameters(self) -> tuple[float, float] | None:
        """``(gamma, lambda)`` when :meth:`postprocess_trajectory` is exactly GAE (advantages
        and value targets added, nothing else), so a sampler may compute it for all its
        fragments at once (`rlflow.returns.gae_columns`); None (the base: returns without a
        critic) makes it postprocess each fragment."""
        return None

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of one episode fragment with advantages added.

        Without a critic (the base) the advantages are the discounted returns with ``gamma``
        (:func:`rlflow.returns.compute_advantages`; ``last_value`` is unused: workers pass
        0.0 to a policy without ``use_critic``). :class:`ActorCriticPolicy` adds GAE.
        """
        return compute_advantages(
            batch,
            last_value=0.0,
            gamma=self.config.gamma,
            lam=1.0,
            use_gae=False,
            use_critic=False,
        )

    # -- learning ---------------------------------------------------------------------------

    @abc.abstractmethod
    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the scalar loss to minimise on a batch (`PolicyUpdate.batch_to_tensors`: its
        numeric columns and, for a sequence batch, its layout), and stats to report: floats,
        or tensors on the device (detached there; `rlflow.learner.stats_to_host` copies them
        all to the host at once)."""

    # -- state ------------------------------------------------------------------------------

    @property
    def weights_module(self) -> nn.Module:
        """The network whose state is :meth:`get_weights` (the model; what workers act with)."""
        return self.model

    def weights_snapshot(self) -> dict[str, torch.Tensor]:
        """A copy of :meth:`get_weights`' tensors made on the policy's device (queued there on
        an accelerator, nothing waits): taken under the learner's lock, then brought to the
        host outside it (`weights_to_host`), so a weight broadcast stalls no update."""
        return {k: v.detach().clone() for k, v in self.weights_module.state_dict().items()}

    def get_weights(self) -> dict[str, Array]:
        """Return the weights as ``{name: numpy array}`` copies (no torch objects)."""
        return weights_to_host(self.weights_snapshot())

    def set_weights(self, weights: Mapping[str, npt.ArrayLike]) -> None:
        """Load weights from :meth:`get_weights` (of a policy with the same model shape)."""
        expected = set(self.weights_module.state_dict())
        if set(weights) != expected:
            missing, extra = (
                sorted(expected - set(weights)),
                sorted(set(weights) - expected),
            )
            raise ConfigError(
                f"{type(self).__name__}.set_weights: weights do not fit the model (missing "
                f"{missing}, unexpected {extra}); were they made for another model config?"
            )
        state = {k: torch.as_tensor(np.array(v)) for k, v in weights.items()}
        self.weights_module.load_state_dict(state)

    def get_state(self) -> dict[str, Any]:
        """Return a picklable snapshot: weights, the update's optimizer state and counters
        (`PolicyUpdate.get_state`) and the sampling RNG state.

        The snapshot shares nothing with the live policy, so later training leaves it intact.
        """
        return {
            "weights": self.get_weights(),
            **self.update.get_state(),
            "generator": self.generator.get_state().numpy().copy(),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`; training then continues exactly."""
        self.set_weights(state["weights"])
        self.update.set_state(state)
        self.generator.set_state(torch.from_numpy(np.array(state["generator"], dtype=np.uint8)))

    def num_params(self) -> int:
        """Return the number of trainable parameters."""
        return sum(p.numel() for p in self.update.parameters)


class ActorCriticPolicy(TorchPolicy):
    """A policy whose postprocessing computes advantages with its critic (PG, A2C, PPO).

    Reads `ActorCriticConfig`'s ``use_critic``, ``use_gae`` and ``lambda_``.
    """

    config: ActorCriticConfig
    config_class: ClassVar[type[AlgorithmConfig]] = ActorCriticConfig
    supports_custom_model: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    @property
    def use_critic(self) -> bool:
        """Whether the policy has a critic (``use_critic``): postprocessing bootstraps from
        V(s_T) and computes GAE advantages (with ``use_gae``)."""
        return self.config.use_critic

    def gae_parameters(self) -> tuple[float, float] | None:
        """``(gamma, lambda_)`` with ``use_gae`` and ``use_critic`` while
        `postprocess_trajectory` is this class's own (a subclass that overrides it gets None:
        its fragments go through its own)."""
        config = self.config
        own = type(self).postprocess_trajectory is ActorCriticPolicy.postprocess_trajectory
        if own and config.use_gae and config.use_critic:
            return float(config.gamma), float(config.lambda_)
        return None

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of one episode fragment with advantages and value targets added.

        ``last_value`` is V(s_T) after the last step (0.0 when it terminated the episode).
        Calls :func:`rlflow.returns.compute_advantages` with the config's ``gamma``,
        ``lambda_``, ``use_gae`` and ``use_critic``.
        """
        config = self.config
        return compute_advantages(
            batch,
            last_value=last_value,
            gamma=config.gamma,
            lam=config.lambda_,
            use_gae=config.use_gae and config.use_critic,
            use_critic=config.use_critic,
        )


def weights_to_host(snapshot: Mapping[str, torch.Tensor]) -> dict[str, Array]:
    """A :meth:`TorchPolicy.weights_snapshot` as ``{name: numpy array}`` on the host (the
    snapshot's own memory on CPU: it is already a copy)."""
    return {k: v.cpu().numpy() for k, v in snapshot.items()}


def adaptive_kl_coeff(coeff: float, sampled_kl: float, target: float) -> float:
    """The next KL penalty coefficient, adapted as RLlib's PPO does (used by PPO and MAML).

    x1.5 if ``sampled_kl > 2 * target``, x0.5 if ``sampled_kl < target / 2``, else unchanged;
    0 stays 0.

    >>> adaptive_kl_coeff(0.2, 0.03, 0.01), adaptive_kl_coeff(0.2, 0.001, 0.01)
    (0.30000000000000004, 0.1)
    """
    if sampled_kl > 2.0 * target:
        return coeff * 1.5
    if sampled_kl < 0.5 * target:
        return coeff * 0.5
    return coeff
