"""Argument checks shared by every layer: one rule per kind of value, one message shape.

Each check takes the value and its *label* — where it was given and its name, written the way a
user would recognise it (``"PPOConfig.lr"``, ``"from_range(num_shards)"``,
``"ReplayBuffer: capacity"``) — and returns the value converted (``int``/``float``) or raises:

- a value of the wrong type (a bool or a string where a number is wanted, a non-callable) raises
  :class:`~rlflow.errors.ConfigTypeError`: a ``TypeError`` that is also a ``ConfigError``;
- a value of the right type outside its range raises :class:`~rlflow.errors.ConfigError` (a
  ``ValueError``).

Messages read ``"<label>=<value> must be <rule>"``:

>>> check_int(3, "from_range(num_shards)", low=1)
3
>>> check_int(0, "from_range(num_shards)", low=1)
Traceback (most recent call last):
...
rlflow.errors.ConfigError: from_range(num_shards)=0 must be an integer >= 1
>>> check_number(True, "PPOConfig.lr", low=0, low_open=True)
Traceback (most recent call last):
...
rlflow.errors.ConfigTypeError: PPOConfig.lr=True must be a number > 0

This module imports nothing of rlflow but its errors, so `rlflow.flow` may use it.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Collection
from typing import Any

from rlflow.errors import ConfigError, ConfigTypeError

__all__ = [
    "check_bool",
    "check_callable",
    "check_choice",
    "check_int",
    "check_number",
    "check_type",
]


def _int_rule(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"an integer in [{low}, {high}]"
    if low is not None:
        return f"an integer >= {low}"
    if high is not None:
        return f"an integer <= {high}"
    return "an integer"


def check_int(value: Any, label: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) in ``[low, high]``.

    numpy integers are accepted. ``None`` bounds are open.
    """
    rule = _int_rule(low, high)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigTypeError(f"{label}={value!r} must be {rule}")
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise ConfigError(f"{label}={value!r} must be {rule}")
    return number


def _number_rule(low: float | None, high: float | None, *, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        return f"a number in {left}{low}, {high}{right}"
    if low is not None:
        return f"a number {'>' if low_open else '>='} {low}"
    if high is not None:
        return f"a number {'<' if high_open else '<='} {high}"
    return "a number"


def check_number(
    value: Any,
    label: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a ``float`` if it is a real number (not a bool) within the bounds.

    ``low_open``/``high_open`` exclude the bound itself (``low=0, low_open=True``: "> 0"). NaN is
    never within bounds.
    """
    rule = _number_rule(low, high, low_open=low_open, high_open=high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigTypeError(f"{label}={value!r} must be {rule}")
    number = float(value)
    below = low is not None and not (number > low if low_open else number >= low)
    above = high is not None and not (number < high if high_open else number <= high)
    if below or above or number != number:
        raise ConfigError(f"{label}={value!r} must be {rule}")
    return number


def check_bool(value: Any, label: str) -> bool:
    """``value`` if it is a ``bool`` (numpy bools too); 0/1 and strings are refused."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise ConfigTypeError(f"{label}={value!r} must be True or False")
    return bool(value)


def check_callable(value: Any, label: str) -> Callable[..., Any]:
    """``value`` if it is callable."""
    if not callable(value):
        raise ConfigTypeError(f"{label}={value!r} must be callable, got {type(value).__name__}")
    fn: Callable[..., Any] = value
    return fn


def check_choice(value: Any, label: str, allowed: Collection[Any]) -> Any:
    """``value`` if it is one of ``allowed`` (the message lists them)."""
    if value not in allowed:
        raise ConfigError(f"{label}={value!r} must be one of {sorted(map(repr, allowed))}")
    return value


def check_type(value: Any, label: str, types: type | tuple[type, ...], expected: str) -> Any:
    """``value`` if it is an instance of ``types``; ``expected`` names them for the message."""
    if not isinstance(value, types):
        raise ConfigTypeError(f"{label}={value!r} must be {expected}, got {type(value).__name__}")
    return value
