"""Gymnasium spaces as plain JSON and back: what an exported policy records of its env.

``Box``: ``low``/``high`` (one number when every entry is the same, else a nested list;
infinities written as the strings ``"inf"``/``"-inf"``, so the file is strict JSON), ``shape``
and ``dtype``. ``Discrete``: ``n`` and ``start``. ``MultiDiscrete``: ``nvec``. ``MultiBinary``:
``n``. ``Dict``: ``spaces``, a list of ``[key, space]`` pairs in the space's order.
``Tuple``: ``spaces``, a list of spaces. Any other space is a `ConfigError` naming it.

>>> box = space_from_json(space_to_json(spaces.Box(-np.inf, 1.0, (2,), np.float32)))
>>> box, box.low.tolist()
(Box(-inf, 1.0, (2,), float32), [-inf, -inf])
>>> space_to_json(spaces.Discrete(3))
{'type': 'Discrete', 'n': 3, 'start': 0}
>>> game = spaces.Dict({"b": spaces.Discrete(2), "a": spaces.MultiBinary(3)})
>>> space_from_json(space_to_json(game))
Dict('a': MultiBinary(3), 'b': Discrete(2))
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.errors import ConfigError

__all__ = ["space_from_json", "space_to_json"]


def _number(value: Any) -> Any:
    """A JSON number, or ``"inf"``/``"-inf"``/``"nan"`` for the values strict JSON lacks."""
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def _bound(array: npt.NDArray[Any]) -> Any:
    """One number when every entry is equal, else the nested list."""
    flat = array.reshape(-1)
    if flat.size and bool(np.all(flat == flat[0])):
        return _number(flat[0])
    return np.vectorize(_number, otypes=[object])(array).tolist()


def space_to_json(space: Any) -> dict[str, Any]:
    """``space`` as a JSON-able dict (see the module docstring); `ConfigError` if unsupported."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": _bound(space.low),
            "high": _bound(space.high),
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        out = {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
        if np.any(space.start != 0):
            out["start"] = np.asarray(space.start).tolist()
        return out
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": [[k, space_to_json(v)] for k, v in space.spaces.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(v) for v in space.spaces]}
    raise ConfigError(
        f"cannot export a policy over {space!r}: exported spaces are Box, Discrete, "
        "MultiDiscrete, MultiBinary, Dict and Tuple"
    )


def _array(value: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    floats = np.vectorize(float, otypes=[np.float64])(np.asarray(value, dtype=object))
    return np.broadcast_to(floats, shape).astype(dtype)


def space_from_json(data: Any) -> Any:
    """The space :func:`space_to_json` wrote; `ConfigError` naming what is wrong."""
    try:
        kind = data["type"]
        if kind == "Box":
            shape, dtype = tuple(int(d) for d in data["shape"]), np.dtype(data["dtype"])
            low, high = _array(data["low"], shape, dtype), _array(data["high"], shape, dtype)
            return spaces.Box(low, high, shape, dtype)
        if kind == "Discrete":
            return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(data["nvec"], start=data.get("start"))
        if kind == "MultiBinary":
            return spaces.MultiBinary(data["n"])
        if kind == "Dict":
            # In the recorded order (a plain dict would be sorted): the flat layout follows it.
            return spaces.Dict(OrderedDict((str(k), space_from_json(v)) for k, v in data["spaces"]))
        if kind == "Tuple":
            return spaces.Tuple([space_from_json(v) for v in data["spaces"]])
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"bad space in an exported policy: {data!r} ({err!r})") from err
    raise ConfigError(f"bad space in an exported policy: unknown type in {data!r}")
