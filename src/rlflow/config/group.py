"""`FieldGroup`: the base of every config field group, and of the configs built from them.

A field group is a small frozen, keyword-only dataclass that declares a cohesive set of fields,
each with its one docstring, and checks only those fields in ``__post_init__`` (calling
``super().__post_init__()`` first, so a config built from several groups runs every group's
checks once, bases before the config's own rules). A config class lists its groups as bases;
it changes an inherited default with the ``defaults`` class keyword instead of declaring the
field again::

    @dataclass(frozen=True, kw_only=True)
    class PPOConfig(ActorCriticConfig, LossWeightsConfig, defaults={"lr": 3e-4}):
        ...

so every field is declared (and documented) once, and each algorithm's defaults read in one
place, its class statement.

A group a config holds whole in one field (``model``: `rlflow.config.model.ModelConfig`,
``self_play``: `rlflow.config.self_play.SelfPlay`) is a `NestedGroup`: built from a dict of its
fields (a YAML block, ``--set model.use_lstm=true``) on top of the holder's default, its errors
name the holder's field (``PPOConfig.model.hidden=...``).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import inspect
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass
from typing import Any, Self

from rlflow.checks import check_int, check_number
from rlflow.errors import ConfigError

__all__ = ["FieldGroup", "NestedGroup"]


@functools.cache
def _type_hints(base: type) -> dict[str, Any]:
    """`typing.get_type_hints` of a dataclass base, once per base (every config class that
    changes a default asks again; resolving them all took about 0.1 s of each command's start)."""
    return typing.get_type_hints(base)


@functools.cache
def _field_name_set(cls: type) -> frozenset[str]:
    """The keywords the config class ``cls`` takes: its fields and init-only variables (asked
    at each construction)."""
    return frozenset(getattr(cls, "__dataclass_fields__", {}))


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
    (a list, a dict, a field group, which may hold one) becomes a ``default_factory`` that
    copies it. Naming a field this class declares itself, or one no base has, is a
    ``TypeError`` when the class is defined.
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
            # A list or dict dataclass refuses as a shared default; a group may hold one.
            if value.__class__.__hash__ is None or isinstance(value, FieldGroup):
                value = dataclasses.field(default_factory=functools.partial(copy.deepcopy, value))
            setattr(cls, name, value)
        cls.__annotations__ = own

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """Refuse a keyword that names no field with a `ConfigError` naming the closest field
        (``PPOConfig(clip_parm=0.2)``: did you mean ``clip_param``?), where the generated
        ``__init__`` would raise a bare ``TypeError``."""
        if kwargs and not _field_name_set(typing.cast(type, cls)).issuperset(kwargs):
            cls.check_keys(kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        """The end of the chain of checks: each group checks its fields after its bases'."""

    # ------------------------------------------------------------------------- its fields
    @classmethod
    def field_names(cls) -> list[str]:
        """Names of all fields, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def check_keys(cls, keys: Iterable[str], where: str | None = None) -> None:
        """Raise :class:`ConfigError` for the first key that is not a field, naming the
        closest valid one; the message names ``where`` (default: the class's name)."""
        names = cls.field_names()
        for key in keys:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"{where or cls.__name__} has no field {key!r}{hint}")

    @classmethod
    def field_type(cls, name: str) -> Any:
        """The resolved type annotation of field ``name``."""
        return _type_hints(typing.cast(type, cls))[name]

    @classmethod
    def field_default(cls, name: str) -> Any:
        """The default of field ``name`` (a fresh copy of a mutable one), or
        ``dataclasses.MISSING`` for a field without one."""
        f = {f.name: f for f in dataclasses.fields(cls)}[name]
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return f.default

    @classmethod
    def held_group(cls, name: str) -> type[FieldGroup] | None:
        """The field group that field ``name`` holds whole (``model``: `ModelConfig`;
        ``self_play``: `SelfPlay`, or None; ``ppo_dqn``'s ``ppo``: `PPOConfig`), else None."""
        hint = cls.field_type(name)
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        groups = [t for t in options if isinstance(t, type) and issubclass(t, FieldGroup)]
        return groups[0] if groups else None

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


@dataclass(frozen=True, kw_only=True)
class NestedGroup(FieldGroup):
    """A field group that a config holds whole in one of its fields (``model``, ``self_play``).

    Given as a dict (a YAML block, ``--set model.use_lstm=true``, ``PPOConfig(model={...})``),
    the holder builds it with :meth:`from_dict`: the dict's keys on top of the holder's
    default, checked by the group's ``__post_init__`` with errors naming the holder's field
    (``where``). :meth:`to_dict` writes it back as such a dict. A subclass's
    ``__post_init__(self, where)`` is given ``where`` and names its fields
    ``f"{where}.{name}"`` (the class's name when ``where`` is None).
    """

    where: InitVar[str | None] = None
    """How errors name this group: the config field that holds it (``"PPOConfig.model"``);
    None: the group's class name. Not a field: not compared, copied or written."""

    @classmethod
    def from_dict(cls, values: Any, where: str, base: Self | None = None) -> Self:
        """``values`` (a dict of fields) as a ``cls``: its keys applied on top of ``base``'s
        fields (None: the fields' own defaults), checked, every error naming ``where``; a key
        that is no field names the closest one."""
        if not isinstance(values, Mapping):
            raise ConfigError(
                f"{where}={values!r} must be a dict of {cls.__name__}'s fields "
                f"{cls.field_names()}, or a {cls.__name__}"
            )
        cls.check_keys(values, where)
        start = {} if base is None else {n: getattr(base, n) for n in cls.field_names()}
        fields = {**start, **values}
        for f in dataclasses.fields(cls):
            required = f.default is f.default_factory is dataclasses.MISSING
            if required and f.name not in fields:
                raise ConfigError(f"{where}={dict(values)!r} needs {f.name} (it has no default)")
        return cls(**fields, where=where)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, tuples as lists (what YAML writes and `from_dict`
        reads back)."""
        values = {name: getattr(self, name) for name in self.field_names()}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
