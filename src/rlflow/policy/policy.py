"""`TorchPolicy`: the torch policy base every algorithm's policy extends.

A policy owns one model (an :class:`~rlflow.models.ActorCritic`, or the config's
``model.custom_model``: `rlflow.models.custom`), an Adam optimizer and a private
``torch.Generator`` for action sampling. The spaces and models a policy class takes are in its
``observation_space_types``, ``action_space_types`` and ``supports_custom_model``, checked
first by `rlflow.policy.spaces.check_policy_spaces`. Subclasses write only
:meth:`TorchPolicy.loss` (and, when needed, :meth:`TorchPolicy.postprocess_trajectory`);
everything a rollout worker or a learner calls is here:

- acting: :meth:`~TorchPolicy.compute_actions`, :meth:`~TorchPolicy.value` (batched, no grad;
  a model with memory takes and returns its state: :meth:`~TorchPolicy.initial_state`);
- learning: :meth:`~TorchPolicy.compute_gradients` / :meth:`~TorchPolicy.apply_gradients`
  (gradients travel as numpy), :meth:`~TorchPolicy.learn_on_batch`,
  :meth:`~TorchPolicy.learn_on_minibatches` (several SGD epochs over shuffled minibatches);
- state: :meth:`~TorchPolicy.get_weights` / :meth:`~TorchPolicy.set_weights` (model only, plain
  numpy) and :meth:`~TorchPolicy.get_state` / :meth:`~TorchPolicy.set_state` (weights,
  optimizer, RNG and ``num_grad_updates``, for checkpoints).

Policy lag: ``num_grad_updates`` counts the optimizer steps a policy's weights went through
(on the learner; a worker's copy is told the learner's count with the weights, through the
global var ``num_grad_updates_per_policy``). Sampled rows carry it (column
``NUM_GRAD_UPDATES``); every learner update reports ``diff_num_grad_updates_vs_sampler_policy``
(RLlib's name): the learner's count minus the rows' mean, i.e. how many updates the weights that
trained on a batch are ahead of the weights that sampled it.

A policy takes its algorithm's typed config (an instance of its ``config_class``) and reads
attributes: every default and every rule is in the config class, none here. The base reads
`AlgorithmConfig`'s ``lr``, ``gamma``, ``grad_clip``, ``model`` (a
`rlflow.config.model.ModelConfig`: the built-in network's options, or a custom model) and
``num_torch_threads`` (applied with ``torch.set_num_threads``, process-wide);
:class:`ActorCriticPolicy` also reads `ActorCriticConfig`'s ``use_critic``, ``use_gae`` and
``lambda_``. Runtime facts (the spaces, the seed, the worker's index) are constructor
arguments. Each algorithm's policy lives in its package (``rlflow.algorithms.<name>.policy``);
this package keeps the base and the pieces several algorithms share.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
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
    NUM_GRAD_UPDATES,
    OBS,
    SEQ_START,
    VF_PREDS,
    SampleBatch,
)
from rlflow.envs.nonfinite import all_finite, finite_array
from rlflow.errors import ConfigError, NonFiniteError
from rlflow.models import ActionDistribution, dist_class_for
from rlflow.models.actors import ActorExport
from rlflow.models.custom import build_policy_model, export_policy_model
from rlflow.models.memory import RecurrentInputs, state_out_key
from rlflow.models.recurrent import is_recurrent
from rlflow.policy.adam import Adam
from rlflow.policy.data_parallel import DataParallel
from rlflow.policy.sequences import sequence_bounds, sequence_outputs
from rlflow.policy.spaces import check_custom_model_support, check_policy_spaces
from rlflow.policy.staging import HostStaging, StagedBatch
from rlflow.returns import compute_advantages
from rlflow.schedules import PiecewiseSchedule

__all__ = [
    "POLICY_LAG",
    "ActorCriticPolicy",
    "TorchPolicy",
    "adaptive_kl_coeff",
    "sequence_minibatches",
    "stats_to_host",
    "weights_to_host",
]

logger = logging.getLogger(__name__)

POLICY_LAG = "diff_num_grad_updates_vs_sampler_policy"
"""Learner stat: updates between the weights that sampled a batch and those training on it."""

Array = npt.NDArray[Any]


class TorchPolicy(abc.ABC):
    """Base class of torch policies: model, optimizer, acting and learning.

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

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: AlgorithmConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build the model and optimizer from ``config``; see the class docstring."""
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
        self.num_grad_updates = 0
        """Optimizer steps the weights went through (a worker's copy: the learner's count at
        the last weight sync); sampled rows record it in ``NUM_GRAD_UPDATES``."""
        self.policy_id: str = DEFAULT_POLICY_ID
        """The policy's id in its worker's policy map (set by the `RolloutWorker` that holds
        it), for messages."""
        self.max_nonfinite_updates = config.max_nonfinite_updates
        """Skipped updates in a row (non-finite loss or gradient) that stop the run."""
        self.num_nonfinite_updates = 0
        """Updates skipped because the loss or the gradient norm was NaN or infinite (their
        step never reached the weights or the optimizer state); see `apply_update`."""
        self.last_update_skipped = False
        """Whether the latest update was skipped (non-finite)."""
        self._nonfinite_streak = 0
        self._last_finite: dict[str, Any] = {}
        self.lr_schedule = (
            None
            if config.lr_schedule is None
            else PiecewiseSchedule.from_points(config.lr_schedule, f"{cls.__name__}.lr_schedule")
        )
        """``config.lr_schedule`` (followed on the global ``timestep``), or None."""
        self.lr = config.lr if self.lr_schedule is None else self.lr_schedule.value(0)
        self.gamma = config.gamma
        self.grad_clip = config.grad_clip
        self.use_critic = False
        """Whether postprocessing bootstraps from V(s_T) (workers compute it only then)."""
        self.use_gae = False
        """Whether postprocessing computes GAE advantages."""
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
        self.staging: HostStaging | None = (
            HostStaging(self.device) if self.device.type == "cuda" else None
        )
        """How :meth:`batch_to_tensors` sends a batch to an accelerator: one pinned, reused
        host buffer and one copy (`rlflow.policy.staging`); None on CPU, where columns become
        tensors without a copy."""
        self._copy_stream: Any = None  # the CUDA stream of stage(), made on first use
        model_config = config.model
        if (model_config.use_lstm or model_config.use_gru) and not self.supports_recurrent:
            raise ConfigError(self._no_memory_message("model.use_lstm/use_gru"))
        self.model: nn.Module = self._build_model(config, seed).to(self.device)
        """The network: ``forward(obs) -> (dist_inputs, value)`` and ``value(obs)`` (an
        `ActorCritic`, or the ``model.custom_model``); a recurrent one
        (`rlflow.models.recurrent`) takes and returns state."""
        self.recurrent = is_recurrent(self.model)
        """Whether the model carries state: acting takes and returns it (`compute_actions`
        with ``state=``), learning runs whole sequences (`model_outputs`)."""
        if self.recurrent and not self.supports_recurrent:
            raise ConfigError(self._no_memory_message("a recurrent model.custom_model"))
        self.max_seq_len = model_config.max_seq_len
        """The longest sequence a recurrent model learns on (``model.max_seq_len``)."""
        self._optimizer: Adam | None = None
        self._params = [p for p in self.model.parameters() if p.requires_grad]
        self.data_parallel: DataParallel | None = None
        """This policy's place in a group of data-parallel learners (``num_learners``), set by
        the learner actor that holds it; None: it learns alone. With one, every optimizer step
        learns on this learner's shard (:meth:`shard`) and averages gradients and loss with the
        other learners (`rlflow.policy.data_parallel`)."""
        self.shard_span: tuple[int, int, int] | None = None
        """While a data-parallel step computes its loss: ``(start, end, rows)``, this learner's
        rows of the step's ``rows``. A loss that draws noise per row (SAC, TD3) draws it for
        every row of the step and keeps its own (`rlflow.algorithms.twin_q`), so the learners
        use the noise one learner would."""

    def _no_memory_message(self, what: str) -> str:
        return (
            f"{what}: {type(self).__name__} does not train policies with memory (yet); "
            "recurrent models fit PG, A2C, A3C, PPO, IMPALA and APPO (rlflow.models.recurrent)"
        )

    @property
    def optimizer(self) -> Adam:
        """Adam (`rlflow.policy.adam.Adam`) over ``model``'s parameters at ``lr``, built on
        first use (rollout workers never step)."""
        if self._optimizer is None:
            self._optimizer = Adam(self.model.parameters(), lr=self.lr)
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer: Adam) -> None:
        self._optimizer = optimizer

    def on_global_var_update(self, global_vars: Mapping[str, Any]) -> None:
        """Follow ``lr_schedule`` to the global ``timestep`` (subclasses extend, calling super)."""
        if self.lr_schedule is not None and "timestep" in global_vars:
            self.lr = self.lr_schedule.value(int(global_vars["timestep"]))
            for group in [] if self._optimizer is None else self._optimizer.param_groups:
                group["lr"] = self.lr

    def _build_model(self, config: AlgorithmConfig, seed: int | None) -> nn.Module:
        """Seed the generator and build the model under ``seed`` (torch's RNG left as it was):
        `rlflow.models.custom.build_policy_model` (the custom model, or an `ActorCritic`)."""
        with torch.random.fork_rng(devices=[]):
            if seed is None:
                self.generator.seed()
            else:
                torch.manual_seed(seed)
                self.generator.manual_seed(seed)
            return build_policy_model(self.observation_space, self.action_space, config.model)

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
        state_out: list[torch.Tensor] = []
        with torch.inference_mode():
            if self.recurrent:
                dist_inputs, values, state_out = self._recurrent_step(obs, memory)
            else:
                dist_inputs, values = self.model(self.obs_to_tensor(obs))
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

    def _recurrent_step(
        self, obs: npt.ArrayLike, memory: RecurrentInputs | None
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One step of the recurrent model for a batch: ``(dist_inputs [B, D], value [B],
        state)``."""
        state, prev_actions, prev_rewards = memory or RecurrentInputs()
        obs_t = self.obs_to_tensor(obs)
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
        ``model(obs)``, or for a recurrent model its outputs over the batch's sequences,
        padding dropped (`rlflow.policy.sequences.sequence_outputs`)."""
        model = self.model if model is None else model
        if self.recurrent:
            return sequence_outputs(model, tensors)
        dist_inputs, values = model(tensors[OBS])
        return dist_inputs, values

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
            f"lr (it is {self.lr}), set grad_clip (it is {self.grad_clip}), or check the "
            "rewards' scale"
        )

    def value(self, obs: npt.ArrayLike, *, memory: RecurrentInputs | None = None) -> Array:
        """Return the value estimates ``[B]`` for a batch of observations, without gradients
        (a recurrent policy: from ``memory``, as in `compute_actions`)."""
        with torch.inference_mode():
            if self.recurrent:
                _, values, _ = self._recurrent_step(obs, memory)
            else:
                values = self.model.value(self.obs_to_tensor(obs))  # type: ignore[operator]
        return values.cpu().numpy()

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of one episode fragment with advantages added.

        Without a critic (the base) the advantages are the discounted returns with ``gamma``
        (:func:`rlflow.returns.compute_advantages`; ``last_value`` is unused: workers pass
        0.0 to a policy without ``use_critic``). :class:`ActorCriticPolicy` adds GAE.
        """
        return compute_advantages(
            batch, last_value=0.0, gamma=self.gamma, lam=1.0, use_gae=False, use_critic=False
        )

    # -- learning ---------------------------------------------------------------------------

    @abc.abstractmethod
    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the scalar loss to minimise on a batch, and stats to report: floats, or
        tensors on the device (detached there; :func:`stats_to_host` copies them all to the
        host at once)."""

    def tensor_columns(self, batch: Mapping[str, Array]) -> dict[str, Array]:
        """The host arrays :meth:`batch_to_tensors` sends: the numeric columns of ``batch``
        (float64 as float32), but ``NUM_GRAD_UPDATES`` (bookkeeping, never in a loss).
        Subclasses add what their loss needs computed on the host (V-trace: the sequences)."""
        columns: dict[str, Array] = {}
        for name, column in batch.items():
            array = np.asarray(column)
            if array.dtype.kind not in "biuf" or name == NUM_GRAD_UPDATES:
                continue
            columns[name] = array.astype(np.float32) if array.dtype == np.float64 else array
        return columns

    def batch_to_tensors(self, batch: Mapping[str, Array]) -> dict[str, torch.Tensor]:
        """:meth:`tensor_columns` of ``batch`` as tensors on the policy's device (uint8
        observations stay uint8 until they are there). To an accelerator they travel together,
        in one copy through :attr:`staging`; a batch this policy staged ahead (:meth:`stage`)
        gives its tensors at once."""
        if isinstance(batch, StagedBatch):
            staged = batch.tensors_for(self, self.device)
            if staged is not None:
                return staged
        columns = self.tensor_columns(batch)
        if self.staging is not None:
            return self.staging.to_device(columns)
        out: dict[str, torch.Tensor] = {}
        for name, array in columns.items():
            array = np.ascontiguousarray(array)
            if not array.flags.writeable:
                # Ray hands out read-only zero-copy arrays; torch needs memory it may write.
                array = array.copy()
            out[name] = self._to_device(torch.from_numpy(array))
        return out

    def stage(self, batch: SampleBatch) -> StagedBatch:
        """``batch`` with its tensors already on their way to the device (on a side CUDA
        stream, so the copy overlaps the training of the batch before it): what the learner
        thread prefetches. On CPU the conversion is just done ahead."""
        if self.device.type != "cuda":
            return StagedBatch(batch, self.batch_to_tensors(batch), owner=self)
        if self._copy_stream is None:
            self._copy_stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
        with torch.cuda.stream(self._copy_stream):
            tensors = self.batch_to_tensors(batch)
            ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
            ready.record(self._copy_stream)
        return StagedBatch(batch, tensors, owner=self, ready=ready)

    def shard(self, batch: SampleBatch) -> tuple[int, int, float]:
        """This learner's rows ``[start, end)`` of one step's ``batch`` under `data_parallel`,
        and their weight in the step's mean loss: contiguous rows weighted by their share
        (`DataParallel.share`); a recurrent model's, whole sequences (`SEQ_START`) weighted
        by their rows. Policies whose loss is not a mean over rows cut elsewhere (V-trace: at
        sequence ends, weighted by steps)."""
        assert self.data_parallel is not None
        if not self.recurrent:
            return self.data_parallel.share(batch.count)
        starts, lengths = sequence_bounds(batch[SEQ_START], batch.count)
        first, end, weight = self.data_parallel.share_runs(lengths)
        if first == end:
            return 0, 0, 0.0
        return int(starts[first]), int(starts[first] + lengths[first:end].sum()), weight

    @contextlib.contextmanager
    def _sharded(self, batch: Mapping[str, Array]) -> Iterator[tuple[Mapping[str, Array], float]]:
        """This learner's part of one step's ``batch`` and its weight (the whole batch and 1.0
        without `data_parallel`); inside, `shard_span` says which rows of the step it holds."""
        if self.data_parallel is None:
            yield batch, 1.0
            return
        batch = batch if isinstance(batch, SampleBatch) else SampleBatch(batch)
        start, end, weight = self.shard(batch)
        self.shard_span = (start, end, batch.count)
        try:
            yield batch.slice(start, end), weight
        finally:
            self.shard_span = None

    def _backward(self, batch: Mapping[str, Array]) -> dict[str, Any]:
        """Fill every parameter's ``.grad`` (clipped) from the loss on ``batch`` (this
        learner's `shard` of it, averaged with the other learners'); return stats (tensors
        left on the device: `stats_to_host` brings them back)."""
        with self._sharded(batch) as (part, weight):
            return self._backward_tensors(self.batch_to_tensors(part), weight)

    def _backward_tensors(
        self, tensors: dict[str, torch.Tensor], weight: float = 1.0
    ) -> dict[str, Any]:
        """`_backward` on a batch already converted by `batch_to_tensors` (this learner's
        shard of a step, of weight ``weight`` in it, under `data_parallel`)."""
        for p in self._params:
            p.grad = None
        loss, stats = self._shard_loss(tensors, weight)
        for p in self._params:
            if p.grad is None:
                # Parameters the loss skips (the value head without a critic) get zeros so that
                # both learning paths feed Adam the same set of gradients.
                p.grad = torch.zeros_like(p)
        loss = self._average_with_learners(self._params, loss, weight)
        max_norm = float("inf") if self.grad_clip is None else self.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        return {**stats, "total_loss": loss, "grad_gnorm": norm}

    def _shard_loss(
        self, tensors: dict[str, torch.Tensor], weight: float
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """The loss on ``tensors`` and its stats, backpropagated into the parameters' ``.grad``;
        a learner whose shard is empty (``weight`` 0: fewer rows than learners) computes
        nothing and adds zero to the average."""
        if weight == 0.0:
            return torch.zeros((), device=self.device), {}
        loss, stats = self.loss(tensors)
        torch.autograd.backward(loss)
        return loss.detach(), stats

    def _average_with_learners(
        self, params: Sequence[nn.Parameter], loss: torch.Tensor, weight: float
    ) -> torch.Tensor:
        """Under `data_parallel`: replace each of ``params``' ``.grad`` (all set) and the loss
        by their ``weight``-ed sum over the learners, one all-reduce (`DataParallel`); return
        the loss (as it was without)."""
        if self.data_parallel is None:
            return loss
        *grads, mean_loss = self.data_parallel.all_reduce_mean(
            [p.grad for p in params if p.grad is not None] + [loss], weight
        )
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        return mean_loss.reshape(())

    def _step(self, batch: Mapping[str, Array]) -> dict[str, Any]:
        """One optimizer step on ``batch`` (`apply_update`); its stats, still on the device."""
        stats = self._backward(batch)
        self.apply_update(stats)
        return stats

    def apply_update(self, stats: Mapping[str, Any]) -> bool:
        """Take the optimizer step on the gradients `_backward` left (or `apply_gradients`
        set), unless the update is not finite: ``total_loss`` or ``grad_gnorm`` in ``stats``
        NaN or infinite (a NaN anywhere in the loss or the gradients shows in one of the two).
        Such an update is skipped: the weights, the optimizer state and ``num_grad_updates``
        stay as they were, `num_nonfinite_updates` counts it, and ``max_nonfinite_updates``
        skipped in a row raise `NonFiniteError` (`nonfinite_report`). True when the step was
        taken.

        The check reads two numbers on the host: on an accelerator it waits for the backward
        pass (one synchronisation per update; `learn_on_batch` has one anyway for its stats).
        """
        checked = [stats[k] for k in ("total_loss", "grad_gnorm") if k in stats]
        self.last_update_skipped = not _finite(checked)
        if self.last_update_skipped:
            self.num_nonfinite_updates += 1
            self._nonfinite_streak += 1
            if self._nonfinite_streak >= self.max_nonfinite_updates:
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
        return (
            f"policy {self.policy_id!r} ({type(self).__name__}): {self._nonfinite_streak} "
            f"updates in a row had a NaN or infinite loss or gradient (max_nonfinite_updates="
            f"{self.max_nonfinite_updates}); each was skipped, so the weights are those of the "
            f"last finite update ({self.num_grad_updates} updates taken, "
            f"{self.num_nonfinite_updates} skipped). Not finite in the last one: {shown}; "
            f"their last finite values: {before}. Usual causes: a learning rate too large "
            f"(lr={self.lr}), no gradient clipping (grad_clip={self.grad_clip}), or NaN/inf "
            "in the batch (see on_nonfinite)"
        )

    def compute_gradients(self, batch: Mapping[str, Array]) -> tuple[list[Array], dict[str, float]]:
        """Return the clipped gradients of the loss on ``batch`` as numpy arrays, and stats.

        One array per trainable parameter, in ``model.parameters()`` order. The weights and
        the optimizer are not changed.
        """
        stats = stats_to_host(self._backward(batch))
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
        norms = torch._foreach_norm([p.grad for p in self._params if p.grad is not None])
        self.apply_update({"grad_gnorm": torch.stack(norms).norm()} if norms else {})

    def learn_on_batch(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """Take one optimizer step on the whole batch; return the loss stats (with the policy
        lag, see :meth:`lag_stats`)."""
        lag = self.lag_stats(batch)
        stats = stats_to_host(self._step(batch))
        if self.last_update_skipped:  # per-row values of a skipped update feed nothing
            stats = {k: v for k, v in stats.items() if not isinstance(v, np.ndarray)}
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
        (full minibatches only; the whole batch when it is smaller); a recurrent model's
        minibatches are whole sequences, about ``sgd_minibatch_size`` rows each
        (`sequence_minibatches`). Returns every stat
        averaged over all steps, plus ``"num_steps"``: summed on the device and brought to the
        host once, after the last step.
        """
        check_int(num_sgd_iter, f"{type(self).__name__}.learn_on_minibatches: num_sgd_iter", low=1)
        lag = self.lag_stats(batch)  # before the first step: later minibatches add the epochs
        collected: dict[str, list[Any]] = {}
        steps = 0
        for minibatch_stats in self._minibatch_steps(batch, num_sgd_iter, sgd_minibatch_size, rng):
            for key, val in minibatch_stats.items():
                collected.setdefault(key, []).append(val)
            steps += 1
        # One mean per stat over all steps (a tensor op per step and stat cost 2% of a CPU
        # PPO update); absent from some steps: averaged over all steps, as zero there.
        stats = stats_to_host({key: _mean(vals, steps) for key, vals in collected.items()})
        stats["num_steps"] = float(steps)
        return {**stats, **lag}

    def _minibatch_steps(
        self, batch: SampleBatch, num_sgd_iter: int, size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, Any]]:
        """One optimizer step per shuffled minibatch, epoch after epoch; yields each one's stats
        (on the device where they can stay there).

        When `learn_on_batch` and `_backward` are this class's own, the batch is converted to
        tensors once and each minibatch is indexed from them (the same rows, permutation and
        numbers as converting each minibatch of ``batch.minibatches(size, rng)``, without
        re-shuffling and re-converting every column for every step).
        """
        plain = (
            type(self).learn_on_batch is TorchPolicy.learn_on_batch
            and type(self)._backward is TorchPolicy._backward
        )
        if self.recurrent:
            yield from self._sequence_minibatch_steps(batch, num_sgd_iter, size, rng, plain=plain)
            return
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
                rows, weight = perm[start : start + size], 1.0
                if self.data_parallel is not None:  # this learner's shard of the minibatch
                    first, end, weight = self.data_parallel.share(len(rows))
                    rows = rows[first:end]
                stats = self._backward_tensors({k: t[rows] for k, t in tensors.items()}, weight)
                self.apply_update(stats)
                yield stats

    def _sequence_minibatch_steps(
        self,
        batch: SampleBatch,
        num_sgd_iter: int,
        size: int,
        rng: np.random.Generator,
        *,
        plain: bool,
    ) -> Iterator[dict[str, Any]]:
        """`_minibatch_steps` of a recurrent model: each epoch shuffles whole sequences and
        cuts them into ``count // size`` minibatches of about ``size`` rows
        (`sequence_minibatches`); under `data_parallel` each learner takes a run of a
        minibatch's sequences, weighted by their rows."""
        size = check_int(size, "SampleBatch.minibatches: size", low=1)
        tensors = self.batch_to_tensors(batch) if plain else None
        for _ in range(num_sgd_iter):
            for sequences in sequence_minibatches(batch[SEQ_START], batch.count, size, rng):
                weight = 1.0
                if self.data_parallel is not None:
                    sizes = [len(s) for s in sequences]
                    first, end, weight = self.data_parallel.share_runs(sizes)
                    sequences = sequences[first:end]
                rows = np.concatenate(sequences) if sequences else np.zeros(0, np.int64)
                if tensors is None:
                    yield self.learn_on_batch(_take_rows(batch, rows))
                    continue
                index = torch.from_numpy(rows).to(self.device)
                stats = self._backward_tensors({k: t[index] for k, t in tensors.items()}, weight)
                self.apply_update(stats)
                yield stats

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
        expected = set(self.model.state_dict())
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
        self.model.load_state_dict(state)

    def get_state(self) -> dict[str, Any]:
        """Return a picklable snapshot: weights, optimizer state and sampling RNG state.

        The snapshot shares nothing with the live policy, so later training leaves it intact.
        """
        return {
            "weights": self.get_weights(),
            "optimizer": (
                None
                if self._optimizer is None
                else _to_cpu(copy.deepcopy(self._optimizer.state_dict()))
            ),
            "generator": self.generator.get_state().numpy().copy(),
            "num_grad_updates": self.num_grad_updates,
            "num_nonfinite_updates": self.num_nonfinite_updates,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`; training then continues exactly."""
        self.set_weights(state["weights"])
        if state["optimizer"] is None:
            self._optimizer = None  # never stepped: a fresh one is built on first use
        else:
            self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        self.generator.set_state(torch.from_numpy(np.array(state["generator"], dtype=np.uint8)))
        self.num_grad_updates = int(state.get("num_grad_updates", 0))
        self.num_nonfinite_updates = int(state.get("num_nonfinite_updates", 0))

    def num_params(self) -> int:
        """Return the number of trainable parameters."""
        return sum(p.numel() for p in self._params)


class ActorCriticPolicy(TorchPolicy):
    """A policy whose postprocessing computes advantages with its critic (PG, A2C, PPO).

    Reads `ActorCriticConfig`'s ``use_critic``, ``use_gae`` and ``lambda_``.
    """

    config_class: ClassVar[type[AlgorithmConfig]] = ActorCriticConfig
    supports_custom_model: ClassVar[bool] = True
    supports_recurrent: ClassVar[bool] = True

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: ActorCriticConfig,
        *,
        seed: int | None = None,
        worker_index: int = 0,
    ) -> None:
        """Build as :class:`TorchPolicy` does and read the advantage settings."""
        super().__init__(
            observation_space, action_space, config, seed=seed, worker_index=worker_index
        )
        self.use_critic = config.use_critic
        self.use_gae = config.use_gae
        self.lambda_ = config.lambda_

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of one episode fragment with advantages and value targets added.

        ``last_value`` is V(s_T) after the last step (0.0 when it terminated the episode).
        Calls :func:`rlflow.returns.compute_advantages` with this policy's ``gamma``,
        ``lambda_``, ``use_gae`` and ``use_critic``.
        """
        return compute_advantages(
            batch,
            last_value=last_value,
            gamma=self.gamma,
            lam=self.lambda_,
            use_gae=self.use_gae and self.use_critic,
            use_critic=self.use_critic,
        )


def sequence_minibatches(
    seq_start: npt.ArrayLike, count: int, size: int, rng: np.random.Generator
) -> list[list[npt.NDArray[np.int64]]]:
    """One epoch of minibatches of whole sequences: the sequences marked by ``seq_start``
    (`SEQ_START`) shuffled with ``rng`` and cut into ``max(count // size, 1)`` minibatches of
    about ``size`` rows each; each minibatch a list of its sequences' row indices, each
    sequence's rows in order (so every minibatch starts with a sequence start)."""
    starts, lengths = sequence_bounds(np.asarray(seq_start), count)
    if count == 0:
        return []
    order = rng.permutation(len(starts))
    ends = np.cumsum(lengths[order])
    parts = max(count // size, 1)
    cuts = np.searchsorted(ends, np.arange(1, parts) * (count / parts), side="left") + 1
    groups = [g for g in np.split(order, np.unique(np.clip(cuts, 1, len(order)))) if len(g)]
    return [[np.arange(starts[i], starts[i] + lengths[i]) for i in group] for group in groups]


def _take_rows(batch: SampleBatch, rows: npt.NDArray[np.int64]) -> SampleBatch:
    return SampleBatch({name: np.asarray(column)[rows] for name, column in batch.items()})


def weights_to_host(snapshot: Mapping[str, torch.Tensor]) -> dict[str, Array]:
    """A :meth:`TorchPolicy.weights_snapshot` as ``{name: numpy array}`` on the host (the
    snapshot's own memory on CPU: it is already a copy)."""
    return {k: v.cpu().numpy() for k, v in snapshot.items()}


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


def _to_cpu(value: Any) -> Any:
    """``value`` (an optimizer state: nested dicts and lists) with every tensor on CPU, so a
    checkpoint of a GPU learner loads anywhere (``load_state_dict`` moves it back)."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value


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
