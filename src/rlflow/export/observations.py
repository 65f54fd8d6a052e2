"""The env's own observations as the flat vectors an exported policy's network takes.

rlflow's networks take one flat vector per observation: the env creator flattens Dict, Tuple,
MultiDiscrete and MultiBinary observations before a policy sees them (`rlflow.envs.flatten`:
the parts side by side, Discrete ones one-hot, an ``"action_mask"`` last). An export of such a
policy records the env's own space (``env_observation_space`` in ``policy.json``), so that
`rlflow.load_policy` takes observations as the env gives them (``env.observe(agent)`` of a
PettingZoo game) and flattens them itself (`EnvObservations`). The ONNX graph
(`rlflow.export.onnx`) takes the flat vectors: `flat_observations` makes them from the env's
observations, reading the export's ``policy.json`` (or the ONNX model's ``rlflow_policy``
metadata).

>>> space = spaces.Dict({"observation": spaces.MultiBinary(2),
...                      "action_mask": spaces.MultiBinary(3)})
>>> observations = EnvObservations(space)
>>> observations.batch([{"observation": [1, 0], "action_mask": [0, 1, 1]}]).tolist()
[[1.0, 0.0, 0.0, 1.0, 1.0]]
>>> observations.batch({"observation": [[1, 0], [0, 1]], "action_mask": [[1, 1, 1], [0, 0, 1]]})
array([[1., 0., 1., 1., 1.],
       [0., 1., 0., 0., 1.]], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.envs.flatten import ObservationFlattener
from rlflow.errors import ConfigError
from rlflow.export.files import read_export
from rlflow.export.spaces import space_from_json

__all__ = ["EnvObservations", "flat_observations"]

Array = npt.NDArray[Any]


class EnvObservations:
    """Flattens the env's own observations of ``space`` for an exported policy (the module
    docstring), and passes flat ones through.

    Args:
        space: the env's observation space (``env_observation_space`` of ``policy.json``):
            ``Dict``, ``Tuple``, ``MultiDiscrete`` or ``MultiBinary``, parts of any kind that
            `rlflow.envs.flatten` flattens.
    """

    def __init__(self, space: gym.Space[Any]) -> None:
        """Lay out the flat vector of ``space`` (`rlflow.envs.flatten.ObservationFlattener`)."""
        self.flattener = ObservationFlattener(space)
        """The layout: ``flattener.space`` is the flat ``Box`` the network takes."""
        self.space = space
        """The env's observation space."""

    def _own(self, obs: Any) -> bool:
        """Whether ``obs`` is one observation as the env gives it (not a flat vector)."""
        if isinstance(obs, Mapping):
            return True
        if isinstance(self.space, spaces.Tuple):
            return isinstance(obs, tuple)
        shape = tuple(self.space.shape or ())
        flat = np.shape(obs)
        return flat == shape and shape != self.flattener.space.shape

    def one(self, obs: Any) -> Array:
        """A batch of one flat vector ``[1, n]`` from one observation: the env's own (a dict
        for a Dict space, a tuple for a Tuple space, an array of the space's shape), or a flat
        vector already."""
        return self.batch([obs])

    def batch(self, observations: Any) -> Array:
        """Flat vectors ``[B, n]`` (float32) from: a list of the env's observations (flat
        vectors may be mixed in); one batched observation, a dict (or, for a Tuple space, a
        tuple) whose leaves have a leading batch axis, as a Gymnasium vector env gives; or an
        array of them ``[B, *space.shape]``. A flat array ``[B, n]`` is returned as it is
        (its shape is checked by the caller). `ConfigError` naming the part that does not fit
        the space."""
        if isinstance(observations, Mapping) or (
            isinstance(observations, tuple) and isinstance(self.space, spaces.Tuple)
        ):
            observations = _unbatch(self.space, observations)
        if isinstance(observations, Sequence) and not isinstance(observations, str | bytes):
            rows = [
                self.flattener(obs) if self._own(obs) else np.asarray(obs, np.float32)
                for obs in observations
            ]
            if not rows:
                return np.zeros((0, self.flattener.size), np.float32)
            return np.stack(rows)
        array = np.asarray(observations)
        if array.ndim >= 1 and self._own(array[0]):
            return np.stack([self.flattener(obs) for obs in array])
        return array


def _unbatch(space: gym.Space[Any], batched: Any) -> list[Any]:
    """A batched Dict or Tuple observation (leaves ``[B, ...]``) as a list of ``B`` ones."""
    leaves = _leaves(batched)
    if not leaves:
        raise ConfigError(f"flat observations: an empty batched observation of {space}")
    size = len(leaves[0])
    if any(len(leaf) != size for leaf in leaves):
        raise ConfigError(
            f"flat observations: the batched observation's parts have different batch sizes "
            f"({sorted({len(leaf) for leaf in leaves})}); each part of {space} needs one row "
            "per observation"
        )
    return [_row(batched, i) for i in range(size)]


def _leaves(obs: Any) -> list[Any]:
    if isinstance(obs, Mapping):
        return [leaf for value in obs.values() for leaf in _leaves(value)]
    if isinstance(obs, tuple):
        return [leaf for value in obs for leaf in _leaves(value)]
    return [np.asarray(obs)]


def _row(obs: Any, i: int) -> Any:
    if isinstance(obs, Mapping):
        return {key: _row(value, i) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(value, i) for value in obs)
    return np.asarray(obs)[i]


def flat_observations(export: str | Path | Mapping[str, Any], observations: Any) -> Array:
    """The flat float32 batch ``[B, n]`` that the policy exported as ``export`` takes (its
    network, and its ONNX graph's input ``obs``), from ``observations`` as the env gives them
    (`EnvObservations.batch`: a list of them, or one batched observation); flat ones are
    returned as they are. ``export``: the export's directory, or its spec (``policy.json``
    parsed; the ONNX model's ``rlflow_policy`` metadata; a directory in object storage too, as
    `rlflow.load_policy` reads it). A policy over flat observations
    (no ``env_observation_space`` recorded) takes them as given.

    Example (an ONNX session of a tic-tac-toe policy; the mask is the last 9 values)::

        session.run(None, {"obs": flat_observations("exported/ttt", [env.observe(agent)])})
    """
    spec = export if isinstance(export, Mapping) else read_export(export)[0]
    recorded = spec.get("env_observation_space")
    if recorded is None:
        return np.asarray(observations)
    batch: Array = EnvObservations(space_from_json(recorded)).batch(observations)
    return batch
