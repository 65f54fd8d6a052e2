"""The numpy side of a flat policy: acting with many parameter vectors at once, and Adam.

No torch here: rollout workers evaluate perturbations with these (`rlflow.algorithms.
perturbation.worker`), and the driver's optimizer of theta is :class:`Adam`. The torch model
they mirror is `rlflow.algorithms.perturbation.policy.FlatMLP`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rlflow.errors import ConfigError

__all__ = ["ACTIVATION_NAMES", "Adam", "batched_forward", "numpy_activation"]

Array = npt.NDArray[Any]

ACTIVATION_NAMES = ("tanh", "relu", "elu")
"""The activations :func:`numpy_activation` knows (`rlflow.config.model`'s)."""


def numpy_activation(name: str) -> Any:
    """The numpy function of activation ``name`` (``tanh``, ``relu``, ``elu``)."""
    if name == "tanh":
        return np.tanh
    if name == "relu":
        return lambda x: np.maximum(x, 0.0)
    if name == "elu":
        return lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))
    raise ConfigError(f"model.activation={name!r}: one of {ACTIVATION_NAMES}")


def batched_forward(
    params: Array, obs: Array, shapes: list[tuple[int, int]], activation: str
) -> Array:
    """The outputs ``[P, out]`` of ``P`` copies of a :class:`FlatMLP`, copy ``p`` with the flat
    parameters ``params[p]`` acting on ``obs[p]``.

    Args:
        params: ``[P, D]`` flat parameter vectors (layer by layer: weight ``[out, in]``
            row-major, then bias).
        obs: ``[P, in]`` one observation per copy.
        shapes: ``[(out, in), ...]`` of the layers (:attr:`FlatMLP.shapes`).
        activation: the hidden layers' activation.

    >>> w = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 0.0]])  # two 1x2 linear maps with a bias
    >>> batched_forward(w, np.array([[1.0, 1.0], [3.0, 4.0]]), [(1, 2)], "tanh").tolist()
    [[3.5], [-4.0]]
    """
    act = numpy_activation(activation)
    h = np.asarray(obs, dtype=np.float32)
    p = np.asarray(params, dtype=np.float32)
    offset = 0
    for k, (out, inp) in enumerate(shapes):
        w = p[:, offset : offset + out * inp].reshape(len(p), out, inp)
        offset += out * inp
        b = p[:, offset : offset + out]
        offset += out
        h = np.einsum("pi,poi->po", h, w) + b
        if k < len(shapes) - 1:
            h = act(h)
    return h


class Adam:
    """Adam on a flat parameter vector in numpy (Kingma and Ba; the optimizer of Salimans et
    al.'s ES, RLlib's ``es.optimizers.Adam``).

    ``step(theta, grad)`` returns ``theta - stepsize_t * m / (sqrt(v) + epsilon)`` with the bias
    corrections folded into ``stepsize_t``; ``grad`` is the gradient of a loss to minimise.
    """

    def __init__(
        self,
        dim: int,
        stepsize: float,
        *,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
    ) -> None:
        """Zero moments for a ``dim``-vector."""
        self.stepsize, self.beta1, self.beta2, self.epsilon = stepsize, beta1, beta2, epsilon
        self.m = np.zeros(dim, dtype=np.float64)
        self.v = np.zeros(dim, dtype=np.float64)
        self.t = 0

    def step(self, theta: Array, grad: Array) -> Array:
        """The new parameters after one step on ``grad``."""
        self.t += 1
        a = self.stepsize * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * (grad * grad)
        new: Array = np.asarray(theta, np.float64) - a * self.m / (np.sqrt(self.v) + self.epsilon)
        return new

    def get_state(self) -> dict[str, Any]:
        """The moments and step count (copies)."""
        return {"m": self.m.copy(), "v": self.v.copy(), "t": self.t}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        self.m = np.array(state["m"], dtype=np.float64)
        self.v = np.array(state["v"], dtype=np.float64)
        self.t = int(state["t"])
