"""`TorchPolicy`: the torch policy base every algorithm's policy extends.

A policy owns one :class:`~rlflow.models.ActorCritic` model, an Adam optimizer and a private
``torch.Generator`` for action sampling. Subclasses write only :meth:`TorchPolicy.loss` (and,
when needed, :meth:`TorchPolicy.postprocess_trajectory`); everything a rollout worker or a
learner calls is here:

- acting: :meth:`~TorchPolicy.compute_actions`, :meth:`~TorchPolicy.value` (batched, no grad);
- learning: :meth:`~TorchPolicy.compute_gradients` / :meth:`~TorchPolicy.apply_gradients`
  (gradients travel as numpy), :meth:`~TorchPolicy.learn_on_batch`,
  :meth:`~TorchPolicy.learn_on_minibatches`;
- state: :meth:`~TorchPolicy.get_weights` / :meth:`~TorchPolicy.set_weights` (model only, plain
  numpy) and :meth:`~TorchPolicy.get_state` / :meth:`~TorchPolicy.set_state` (weights,
  optimizer and RNG, for checkpoints).

Config keys read here (subclasses read more), with defaults:

``lr`` (3e-4, > 0), ``gamma`` (0.99, [0, 1]), ``lambda_`` (1.0, [0, 1]), ``use_gae`` (True),
``use_critic`` (True), ``model`` (``{"hidden": (64, 64), "activation": "tanh",
"shared": False}``), ``grad_clip`` (None, else > 0: clip by global norm),
``num_torch_threads`` (1, >= 1; applied with ``torch.set_num_threads``, process-wide).
"""

from __future__ import annotations

import abc
import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from rlflow.data.sample_batch import ACTION_DIST_INPUTS, LOGP, VF_PREDS, SampleBatch
from rlflow.errors import ConfigError
from rlflow.models import ActionDistribution, ActorCritic, build_model, dist_class_for
from rlflow.returns import compute_advantages

__all__ = ["TorchPolicy"]

logger = logging.getLogger(__name__)

Array = npt.NDArray[Any]

_MODEL_DEFAULTS: dict[str, Any] = {
    "hidden": (64, 64),
    "activation": "tanh",
    "shared": False,
}


class TorchPolicy(abc.ABC):
    """Base class of torch policies: model, optimizer, acting and learning.

    Args:
        observation_space: the env's observation space.
        action_space: the env's action space (``Discrete`` or 1-D ``Box``).
        config: algorithm config as a mapping; the keys in the module docstring are read here,
            unknown keys are left to subclasses.
        seed: seeds the model initialisation and the sampling generator; ``None`` draws
            fresh entropy. Torch's global RNG is left as it was.
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: Mapping[str, Any],
        *,
        seed: int | None = None,
    ) -> None:
        """Validate the config, build the model and optimizer; see the class docstring."""
        self.observation_space = observation_space
        self.action_space = action_space
        self.config: dict[str, Any] = dict(config)
        """The config this policy was built with (a copy)."""
        self.lr = self._number("lr", 3e-4, low=0.0, low_open=True)
        self.gamma = self._number("gamma", 0.99, low=0.0, high=1.0)
        self.lambda_ = self._number("lambda_", 1.0, low=0.0, high=1.0)
        self.use_gae = bool(self.config.get("use_gae", True))
        self.use_critic = bool(self.config.get("use_critic", True))
        clip = self.config.get("grad_clip")
        self.grad_clip = (
            None if clip is None else self._number("grad_clip", 0.0, low=0.0, low_open=True)
        )
        threads = self.config.get("num_torch_threads", 1)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise self._bad("num_torch_threads", threads, "must be an int >= 1")
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        model_cfg = {**_MODEL_DEFAULTS, **dict(self.config.get("model") or {})}
        unknown = sorted(set(model_cfg) - set(_MODEL_DEFAULTS))
        if unknown:
            raise self._bad("model", self.config.get("model"), f"has unknown keys {unknown}")
        self.dist_class: type[ActionDistribution] = dist_class_for(action_space)
        """The action distribution class that reads the model's ``dist_inputs``."""
        self.generator = torch.Generator()
        """Private RNG for action sampling (seeded from ``seed``)."""
        with torch.random.fork_rng(devices=[]):
            if seed is None:
                self.generator.seed()
            else:
                torch.manual_seed(seed)
                self.generator.manual_seed(seed)
            self.model: ActorCritic = build_model(
                observation_space,
                action_space,
                hidden=tuple(model_cfg["hidden"]),
                activation=str(model_cfg["activation"]),
                shared=bool(model_cfg["shared"]),
            )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.lr)
        self._params = [p for p in self.model.parameters() if p.requires_grad]

    # -- config helpers ---------------------------------------------------------------------

    def _bad(self, key: str, value: Any, rule: str) -> ConfigError:
        """Return a `ConfigError` naming this class, the key, the value and the rule."""
        return ConfigError(f"{type(self).__name__}: config {key}={value!r} {rule}.")

    def _number(
        self,
        key: str,
        default: float,
        *,
        low: float = float("-inf"),
        high: float = float("inf"),
        low_open: bool = False,
    ) -> float:
        """Read a float config key and check ``low <=/< value <= high``."""
        value = self.config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
            raise self._bad(key, value, "must be a number")
        ok = (value > low if low_open else value >= low) and value <= high
        if not ok:
            lo = "(" if low_open else "["
            raise self._bad(key, value, f"must be in {lo}{low}, {high}]")
        return float(value)

    # -- acting -----------------------------------------------------------------------------

    def obs_to_tensor(self, obs: npt.ArrayLike) -> torch.Tensor:
        """Convert a batch of observations to a tensor (float64 becomes float32, uint8 stays)."""
        array = np.ascontiguousarray(obs)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        return torch.from_numpy(array)

    def compute_actions(
        self, obs: npt.ArrayLike, *, explore: bool = True
    ) -> tuple[Array, dict[str, Array]]:
        """Return actions for a batch of observations ``[B, *obs_shape]``, without gradients.

        ``explore=True`` samples from the distribution (using this policy's generator),
        ``False`` takes its mode. The extra dict holds the columns a rollout stores:
        `LOGP` ``[B]``, `VF_PREDS` ``[B]`` and `ACTION_DIST_INPUTS` ``[B, input_dim]``.
        ``Box`` actions are not clipped to the space; the env side clips.
        """
        with torch.no_grad():
            dist_inputs, values = self.model(self.obs_to_tensor(obs))
            dist = self.dist_class(dist_inputs, generator=self.generator)
            actions = dist.sample() if explore else dist.deterministic()
            logp = dist.logp(actions)
        extra = {
            LOGP: logp.numpy(),
            VF_PREDS: values.numpy(),
            ACTION_DIST_INPUTS: dist_inputs.numpy(),
        }
        return actions.numpy(), extra

    def value(self, obs: npt.ArrayLike) -> Array:
        """Return the value estimates ``[B]`` for a batch of observations, without gradients."""
        with torch.no_grad():
            values: torch.Tensor = self.model.value(self.obs_to_tensor(obs))
        return values.numpy()

    def postprocess_trajectory(self, batch: SampleBatch, *, last_value: float) -> SampleBatch:
        """Return a copy of one episode fragment with advantages and value targets added.

        ``last_value`` is V(s_T) after the last step (0.0 when it terminated the episode). The
        default calls :func:`rlflow.returns.compute_advantages` with this policy's ``gamma``,
        ``lambda_``, ``use_gae`` and ``use_critic``; GAE is used only with a critic.
        """
        return compute_advantages(
            batch,
            last_value=last_value,
            gamma=self.gamma,
            lam=self.lambda_,
            use_gae=self.use_gae and self.use_critic,
            use_critic=self.use_critic,
        )

    # -- learning ---------------------------------------------------------------------------

    @abc.abstractmethod
    def loss(self, batch_tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Return the scalar loss to minimise on a batch, and float stats to report."""

    def batch_to_tensors(self, batch: Mapping[str, Array]) -> dict[str, torch.Tensor]:
        """Convert the numeric columns of ``batch`` to tensors (float64 becomes float32)."""
        out: dict[str, torch.Tensor] = {}
        for name, column in batch.items():
            array = np.asarray(column)
            if array.dtype.kind not in "biuf":
                continue
            if array.dtype == np.float64:
                array = array.astype(np.float32)
            array = np.ascontiguousarray(array)
            if not array.flags.writeable:
                # Ray hands out read-only zero-copy arrays; torch needs memory it may write.
                array = array.copy()
            out[name] = torch.from_numpy(array)
        return out

    def _backward(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """Fill every parameter's ``.grad`` (clipped) from the loss on ``batch``; return stats."""
        self.optimizer.zero_grad(set_to_none=True)
        loss, stats = self.loss(self.batch_to_tensors(batch))
        loss.backward()
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
        grads = [p.grad.detach().numpy().copy() for p in self._params if p.grad is not None]
        return grads, stats

    def apply_gradients(self, grads: Sequence[npt.ArrayLike]) -> None:
        """Take one optimizer step with ``grads`` as given by :meth:`compute_gradients`."""
        if len(grads) != len(self._params):
            raise ConfigError(
                f"{type(self).__name__}.apply_gradients: got {len(grads)} gradients for "
                f"{len(self._params)} parameters; pass the list compute_gradients returned."
            )
        for p, g in zip(self._params, grads, strict=True):
            grad = torch.as_tensor(np.asarray(g), dtype=p.dtype)
            if grad.shape != p.shape:
                raise ConfigError(
                    f"{type(self).__name__}.apply_gradients: gradient shape {tuple(grad.shape)} "
                    f"does not match parameter shape {tuple(p.shape)}."
                )
            p.grad = grad.clone()
        self.optimizer.step()

    def learn_on_batch(self, batch: Mapping[str, Array]) -> dict[str, float]:
        """Take one optimizer step on the whole batch; return the loss stats."""
        stats = self._backward(batch)
        self.optimizer.step()
        return stats

    def learn_on_minibatches(
        self,
        batch: SampleBatch,
        *,
        num_epochs: int,
        minibatch_size: int,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Run ``num_epochs`` passes over shuffled minibatches, one optimizer step each.

        Each epoch reshuffles with ``rng`` and uses ``batch.minibatches(minibatch_size, rng)``
        (full minibatches only; the whole batch when it is smaller). Returns every stat
        averaged over all steps, plus ``"num_steps"``.
        """
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 1:
            raise ConfigError(
                f"{type(self).__name__}.learn_on_minibatches: num_epochs={num_epochs!r} "
                "must be an int >= 1."
            )
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(num_epochs):
            for minibatch in batch.minibatches(minibatch_size, rng):
                for key, val in self.learn_on_batch(minibatch).items():
                    totals[key] = totals.get(key, 0.0) + val
                steps += 1
        stats = {key: total / max(steps, 1) for key, total in totals.items()}
        stats["num_steps"] = float(steps)
        return stats

    # -- state ------------------------------------------------------------------------------

    def get_weights(self) -> dict[str, Array]:
        """Return the model's state as ``{name: numpy array}`` copies (no torch objects)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

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
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "generator": self.generator.get_state().numpy().copy(),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`get_state`; training then continues exactly."""
        self.set_weights(state["weights"])
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        self.generator.set_state(torch.from_numpy(np.array(state["generator"], dtype=np.uint8)))

    def num_params(self) -> int:
        """Return the number of trainable parameters."""
        return sum(p.numel() for p in self._params)
