"""`load_policy`: a policy exported by `Trainer.export_policy`, acting in a plain process.

Loading imports torch, Gymnasium and the actor's module only: no Ray, no worker, no trainer,
no config class. Actions follow the env rule of training and evaluation
(`rlflow.envs.records.env_action`): Box actions clipped to the bounds, Discrete ones as ints.
Observations are given raw, as the env returns them: an export of a run with
``observation_filter="MeanStdFilter"`` normalizes them with the learner's filter, frozen
(`LoadedPolicy.obs_filter`), as `rlflow.Trainer.compute_actions` and evaluation do. Structured
ones (Dict, Tuple, MultiDiscrete, MultiBinary: a PettingZoo game's ``env.observe(agent)``,
``{"observation", "action_mask"}``) are taken as the env gives them and flattened as in
training (`LoadedPolicy.env_observations`, `rlflow.export.observations`); the flat vectors the
network takes are accepted too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from gymnasium import spaces

from rlflow.checks import check_bool
from rlflow.errors import ConfigError
from rlflow.export.files import read_export
from rlflow.export.observations import EnvObservations
from rlflow.export.spaces import space_from_json
from rlflow.filters import filter_from_json
from rlflow.models.actors import ExportableActor, actor_class
from rlflow.models.memory import RecurrentInputs

__all__ = [
    "LoadedPolicy",
    "batch_actions",
    "load_policy",
    "memory_of_one",
    "obs_batch",
    "single_result",
]

Array = npt.NDArray[Any]


def obs_batch(space: Any, obs: npt.ArrayLike, where: str) -> Array:
    """``obs`` as a contiguous batch for a model (float64 becomes float32, as a policy does);
    `ConfigError` when it is not a batch ``[B, *space.shape]``."""
    array = np.ascontiguousarray(obs)
    shape = tuple(getattr(space, "shape", None) or ())
    if array.ndim != len(shape) + 1 or tuple(array.shape[1:]) != shape:
        raise ConfigError(
            f"{where}: observations of shape {array.shape} are not a batch of {space} "
            f"observations (shape [B, {', '.join(map(str, shape))}])"
        )
    return array.astype(np.float32) if array.dtype == np.float64 else array


def batch_actions(space: Any, actions: Array) -> Array:
    """A batch of a policy's actions as its env takes them: clipped to a Box's bounds (in its
    dtype); other spaces' actions unchanged."""
    if isinstance(space, spaces.Box):
        return np.clip(actions, space.low, space.high).astype(space.dtype, copy=False)
    return actions


def single_action(space: Any, actions: Array) -> Any:
    """The one action of a batch of one: an ``int`` for Discrete, else the row."""
    return int(actions[0]) if isinstance(space, spaces.Discrete) else actions[0]


def memory_of_one(
    state: Sequence[npt.ArrayLike] | None, prev_action: Any, prev_reward: float | None
) -> dict[str, Any]:
    """The memory keywords of ``compute_actions`` (``state``, ``prev_actions``,
    ``prev_rewards``) for one observation: each input given as a batch of one (None stays)."""
    return {
        "state": None if state is None else [np.asarray(s)[None] for s in state],
        "prev_actions": None if prev_action is None else np.asarray(prev_action)[None],
        "prev_rewards": None if prev_reward is None else np.asarray([prev_reward], np.float32),
    }


def single_result(space: Any, result: Any, *, recurrent: bool) -> Any:
    """``compute_actions``' result on a batch of one, unbatched: the action (`single_action`),
    with the state after it, ``(action, state_out)``, for a policy with memory."""
    if not recurrent:
        return single_action(space, result)
    actions, state_out = result
    return single_action(space, actions), [s[0] for s in state_out]


class LoadedPolicy:
    """An exported policy rebuilt for acting (made by :func:`load_policy`).

    Args:
        actor: the rebuilt network, weights loaded.
        spec: the export's ``policy.json`` (algorithm, policy class, spaces, model options,
            env and its preprocessing).
        seed: seeds :attr:`generator`; None draws fresh entropy.
    """

    def __init__(self, actor: ExportableActor, spec: dict[str, Any], *, seed: int | None) -> None:
        """Keep ``actor`` (in eval mode) and read the spaces from ``spec``."""
        self.actor = actor.eval()
        """The network (an `rlflow.models.actors.ExportableActor`)."""
        self.spec = spec
        """The export's spec (the parsed ``policy.json``)."""
        self.observation_space = space_from_json(spec["observation_space"])
        self.action_space = space_from_json(spec["action_space"])
        recorded = spec.get("env_observation_space")
        self.env_observations = (
            None if recorded is None else EnvObservations(space_from_json(recorded))
        )
        """How the env's own observations become the flat ones :attr:`observation_space`
        describes (`rlflow.export.observations.EnvObservations`; its ``space`` is the env's
        space), for an env whose observations are structured; None when the env gives flat
        ones."""
        self.obs_filter = filter_from_json(spec.get("observation_filter"))
        """The frozen observation filter of the run (None: ``"NoFilter"``): a callable
        ``raw obs batch -> filtered batch`` applied before the actor."""
        self.generator = torch.Generator()
        """The RNG of exploring actions (reseed it with :meth:`seed`)."""
        self.seed(seed)
        self.recurrent = callable(getattr(self.actor, "act_with_state", None))
        """Whether the policy has memory: it acts from a state (`get_initial_state`) and
        returns the next one."""

    def get_initial_state(self) -> list[Array]:
        """A policy with memory's state at an episode's start, for one observation (``[]``
        without memory)."""
        if not self.recurrent:
            return []
        with torch.inference_mode():
            return [s[0].numpy() for s in self.actor.initial_state(1)]  # type: ignore[operator]

    @property
    def algorithm(self) -> str:
        """The algorithm that trained the policy (``"ppo"``, ``"dqn"``, ...)."""
        return str(self.spec["algorithm"])

    def seed(self, seed: int | None) -> None:
        """Seed the exploring actions' generator (None: fresh entropy)."""
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

    def compute_actions(
        self,
        obs_batch_: npt.ArrayLike,
        *,
        explore: bool = False,
        state: Sequence[npt.ArrayLike] | None = None,
        prev_actions: npt.ArrayLike | None = None,
        prev_rewards: npt.ArrayLike | None = None,
    ) -> Any:
        """Actions ``[B, ...]`` for raw observations ``[B, *obs_shape]`` (filtered first by
        :attr:`obs_filter`, if any): greedy (the distribution's mode, argmax Q), or with
        ``explore`` drawn with :attr:`generator`. A policy with memory (:attr:`recurrent`)
        acts from ``state`` (None: the initial state), with the previous actions and rewards
        when its model reads them, and returns ``(actions, state_out)``.

        With structured env observations (:attr:`env_observations`), ``obs_batch_`` may also be
        a list of them as the env gives them, or one batched observation (a dict of arrays
        with a leading batch axis, as a Gymnasium vector env gives;
        `rlflow.export.observations.EnvObservations.batch`). An action mask in them is obeyed:
        a masked action is never chosen."""
        explore = check_bool(explore, "LoadedPolicy.compute_actions: explore")
        if self.env_observations is not None:
            obs_batch_ = self.env_observations.batch(obs_batch_)
        obs = obs_batch(self.observation_space, obs_batch_, "LoadedPolicy.compute_actions")
        if self.obs_filter is not None:
            obs = self.obs_filter(obs)
        if not self.recurrent:
            if state is not None:
                raise ConfigError(
                    "LoadedPolicy.compute_actions: state= given to a policy without memory"
                )
            with torch.inference_mode():
                actions = self.actor.act(
                    torch.from_numpy(obs), explore=explore, generator=self.generator
                )
            return batch_actions(self.action_space, actions.numpy())
        memory = RecurrentInputs(
            None if state is None else [torch.as_tensor(np.asarray(s, np.float32)) for s in state],
            None if prev_actions is None else torch.as_tensor(np.asarray(prev_actions)),
            None if prev_rewards is None else torch.as_tensor(np.asarray(prev_rewards, np.float32)),
        )
        with torch.inference_mode():
            actions, new_state = self.actor.act_with_state(  # type: ignore[operator]
                torch.from_numpy(obs), memory, explore=explore, generator=self.generator
            )
        return batch_actions(self.action_space, actions.numpy()), [s.numpy() for s in new_state]

    def compute_single_action(
        self,
        obs: npt.ArrayLike,
        *,
        explore: bool = False,
        state: Sequence[npt.ArrayLike] | None = None,
        prev_action: Any = None,
        prev_reward: float | None = None,
    ) -> Any:
        """The action for one observation (an ``int`` for a Discrete action space); a policy
        with memory returns ``(action, state_out)`` from ``state`` (None: the initial one).
        ``obs`` is the env's own observation (a dict such as a PettingZoo game's
        ``{"observation", "action_mask"}``, flattened as in training: :attr:`env_observations`)
        or the flat vector the network takes."""
        if self.env_observations is not None:
            batch = self.env_observations.one(obs)
        else:
            batch = np.expand_dims(np.asarray(obs), 0)
        memory = memory_of_one(state, prev_action, prev_reward)
        result = self.compute_actions(batch, explore=explore, **memory)
        return single_result(self.action_space, result, recurrent=self.recurrent)

    def __repr__(self) -> str:
        return (
            f"LoadedPolicy({self.algorithm!r}, {type(self.actor).__name__}, "
            f"obs={self.observation_space}, actions={self.action_space})"
        )


def load_policy(path: str | Path, *, seed: int | None = None) -> LoadedPolicy:
    """Load the policy exported as the directory ``path`` (`rlflow.Trainer.export_policy`,
    ``rlflow export``) for acting: greedy actions equal the trainer's on the same observations.

    Reads ``policy.json`` and ``weights.pt`` (tensors only: a file holding other pickled objects
    is refused). ``seed`` seeds the exploring actions. `ConfigError` naming the file for a bad
    path or a damaged, foreign or unsafe export.
    """
    spec, weights = read_export(path)
    try:
        filter_from_json(spec.get("observation_filter"))  # a bad record: named with the path
    except ConfigError as err:
        raise ConfigError(f"load_policy: {str(path)!r}: {err}") from err
    try:
        cls = actor_class(str(spec["actor_class"]))
        obs_space = space_from_json(spec["observation_space"])
        act_space = space_from_json(spec["action_space"])
        actor = cls(obs_space, act_space, **spec["actor_options"])
    except (KeyError, TypeError) as err:
        raise ConfigError(f"load_policy: {str(path)!r}: bad policy.json ({err!r})") from err
    state = {k: torch.from_numpy(np.array(v)) for k, v in weights.items()}
    try:
        actor.load_state_dict(state)
    except RuntimeError as err:
        raise ConfigError(f"load_policy: {str(path)!r}: weights do not fit ({err})") from err
    return LoadedPolicy(actor, spec, seed=seed)
