"""`FieldGroup`: the base of every config field group, and of the configs built from them.

A field group is a small frozen, keyword-only dataclass that declares a cohesive set of fields,
each with its one docstring, and checks only those fields in ``__post_init__`` (calling
``super().__post_init__()`` first, so a config built from several groups runs every group's
checks once, bases before the config's own rules). A config class lists its groups as bases;
it changes an inherited default with the ``defaults`` class keyword instead of declaring the
field again::

    @dataclass(frozen=True, kw_only=True)
    class PPOConfig(ActorCriticConfig, LossWeightsConfig, defaults={"lr": 5e-5}):
        ...

so every field is declared (and documented) once, and each algorithm's defaults read in one
place, its class statement.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlflow.checks import check_int, check_number
from rlflow.errors import ConfigError

__all__ = ["FieldGroup"]


@functools.cache
def _type_hints(base: type) -> dict[str, Any]:
    """`typing.get_type_hints` of a dataclass base, once per base (every config class that
    changes a default asks again; resolving them all took about 0.1 s of each command's start)."""
    return typing.get_type_hints(base)


def _inherited_field_type(cls: type, name: str) -> Any:
    """The resolved type of field ``name`` as the nearest dataclass base of ``cls`` has it."""
    for base in cls.__mro__[1:]:
        if name in getattr(base, "__dataclass_fields__", {}):
            return _type_hints(base)[name]
    names = sorted({n for b in cls.__mro__[1:] for n in getattr(b, "__dataclass_fields__", {})})
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise TypeError(f"{cls.__name__}: defaults names {name!r}, which no base declares{hint}")


@dataclass(frozen=True, kw_only=True)
class FieldGroup:
    """Base of field groups and configs: the ``defaults`` class keyword and the checks' helpers.

    ``defaults`` (``{field: value}``) sets the default of fields a base declares, for this class
    and its subclasses; the field keeps its base's type, docstring and place. A mutable value
    (a list or dict) becomes a ``default_factory`` that copies it. Naming a field this class
    declares itself, or one no base has, is a ``TypeError`` when the class is defined.
    """

    def __init_subclass__(cls, *, defaults: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not defaults:
            return
        # Runs when the class object exists and before @dataclass reads it: an annotation and
        # a class attribute for each name make dataclass re-create the inherited field with
        # this default (in its base's place), while the class body declares nothing.
        own = inspect.get_annotations(cls)  # this class body's own, as a new dict
        for name, value in defaults.items():
            if name in own:
                raise TypeError(
                    f"{cls.__name__}: {name!r} is declared in the class body; give its default "
                    "there, not in defaults"
                )
            own[name] = _inherited_field_type(cls, name)
            if value.__class__.__hash__ is None:  # what dataclass refuses as a shared default
                value = dataclasses.field(default_factory=functools.partial(copy.deepcopy, value))
            setattr(cls, name, value)
        cls.__annotations__ = own

    def __post_init__(self) -> None:
        """The end of the chain of checks: each group checks its fields after its bases'."""

    # ------------------------------------------------------------------- check helpers
    def _label(self, name: str) -> str:
        """``"<ConfigClass>.<field>"``, how messages name a field."""
        return f"{type(self).__name__}.{name}"

    def _bad(self, name: str, rule: str) -> ConfigError:
        """The error for field ``name``: ``"<Class>.<name>=<value> <rule>"``."""
        return ConfigError(f"{self._label(name)}={getattr(self, name)!r} {rule}")

    def _check_int(self, name: str, low: int) -> None:
        check_int(getattr(self, name), self._label(name), low=low)

    def _check_positive(self, name: str) -> None:
        check_number(getattr(self, name), self._label(name), low=0, low_open=True)

    def _check_range(self, name: str, low: float, high: float) -> None:
        check_number(getattr(self, name), self._label(name), low=low, high=high)

    def _check_le(self, name: str, other: str) -> None:
        """Raise unless field ``name`` <= field ``other`` (e.g. minibatch <= train batch)."""
        if getattr(self, name) > getattr(self, other):
            raise self._bad(name, f"must be <= {other}={getattr(self, other)!r}")
