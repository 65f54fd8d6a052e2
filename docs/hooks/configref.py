"""The config reference, read from the config classes: every field of every group and algorithm.

A field is declared once, with its docstring (the string literal under it), in one field group
(`rlflow.config.group.FieldGroup`); a config class lists groups as bases and changes defaults
with its ``defaults=`` class keyword. So a field's home is the most basic class of a config's MRO
that annotates it, its docstring is read from that class's source (`ast`), and its default is
the group's, with every algorithm that changes it named beside it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Iterable
from typing import Any

from rlflow.algorithms import ALGORITHMS
from rlflow.config.group import FieldGroup, NestedGroup

__all__ = [
    "Field",
    "algorithm_fields",
    "config_reference",
    "field_docs",
    "fields_table",
    "group_anchor",
    "groups_of",
]


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a config class as the reference shows it."""

    name: str
    group: type
    type: str
    default: Any
    doc: str
    extra: str = ""
    """A column more, where a table has one (the reference's "Used by")."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstrings of the fields ``cls``'s own class body declares (a string literal right
    under an annotated assignment), dedented."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    docs: dict[str, str] = {}
    assert isinstance(body, ast.ClassDef)
    for stmt, after in zip(body.body, [*body.body[1:], None], strict=True):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        value = after.value if isinstance(after, ast.Expr) else None
        doc = value.value if isinstance(value, ast.Constant) else None
        if isinstance(doc, str):
            docs[stmt.target.id] = inspect.cleandoc(doc)
    return docs


def _home(cls: type, name: str) -> type:
    """The class that declares field ``name`` of ``cls``: the most basic one annotating it (a
    ``defaults=`` override re-annotates the name in the overriding class)."""
    declaring = [base for base in reversed(cls.__mro__) if name in inspect.get_annotations(base)]
    documented = [base for base in declaring if name in field_docs(base)]
    return (documented or declaring)[0]


def _type_name(hint: Any) -> str:
    """A field's type as written in the source (``int | None``, ``tuple[int, ...]``)."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    text = (
        str(hint)
        if not isinstance(hint, types.UnionType)
        else " | ".join(_type_name(arg) for arg in typing.get_args(hint))
    )
    return re.sub(r"\b(?:typing|collections\.abc|rlflow(?:\.\w+)*)\.", "", text).replace(
        "NoneType", "None"
    )


@functools.cache
def _fields(cls: type[FieldGroup]) -> list[Field]:
    """Every field of config class ``cls``, with its default in ``cls``."""
    out = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        home = _home(cls, f.name)
        out.append(
            Field(
                f.name,
                home,
                _type_name(cls.field_type(f.name)),
                cls.field_default(f.name),
                field_docs(home).get(f.name, ""),
            )
        )
    return out


def algorithm_fields(algo: str) -> list[Field]:
    """Every field of algorithm ``algo``'s config class, with that algorithm's defaults."""
    return _fields(ALGORITHMS[algo].config_cls)


def groups_of(algo: str) -> list[type]:
    """The classes that declare ``algo``'s fields in its config's MRO order: its own first,
    then its family's and the groups every config has."""
    homes = {f.group for f in algorithm_fields(algo)}
    return [cls for cls in ALGORITHMS[algo].config_cls.__mro__ if cls in homes]


def _algorithms_with(group: type) -> list[str]:
    """The algorithms whose config has ``group``'s fields."""
    return [algo for algo, spec in ALGORITHMS.items() if issubclass(spec.config_cls, group)]


def group_anchor(group: type) -> str:
    """The anchor of ``group``'s section in the config reference."""
    return group.__name__.lower()


def _value(value: Any) -> str:
    """A default as an inline code span, as YAML writes it (a function as ``module:name``, the
    way a config file names one)."""
    if isinstance(value, NestedGroup):
        return "see below"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"`{value.__module__}:{value.__qualname__}`"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, bool) or value is None:
        return f"`{str(value).lower() if value is not None else 'null'}`"
    return f"`{value!r}`"


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, its pipes outside code spans
    escaped (a code span may hold one: the table reads it as text)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(p.replace("|", "\\|") if i % 2 == 0 else p for i, p in enumerate(parts))


def fields_table(fields: Iterable[Field], *, prefix: str = "", extra: str | None = None) -> str:
    """A Markdown table of ``fields``: name, type, default, the column ``extra`` (filled from
    each field's `Field.extra`) when given, and the description."""
    more = f" {extra} |" if extra else ""
    rows = [
        f"| Field | Type | Default |{more} Description |",
        "|---|---|---|" + "---|" * (2 if extra else 1),
    ]
    for f in fields:
        cells = [f"`{prefix}{f.name}`", f"`{f.type}`", _value(f.default)]
        cells += [f.extra] if extra else []
        rows.append("| " + " | ".join([*cells, _cell(f.doc)]) + " |")
    return "\n".join(rows)


def _nested(group: type[NestedGroup], holder: str) -> str:
    """The fields of a group a config holds whole (``model``, ``self_play``) as dotted keys."""
    return fields_table(_fields(group), prefix=f"{holder}.")


def _users(group: type) -> dict[str, list[str]]:
    """Per field of ``group``: the algorithms whose config has it."""
    users: dict[str, list[str]] = {}
    for algo in _algorithms_with(group):
        for f in algorithm_fields(algo):
            if f.group is group:
                users.setdefault(f.name, []).append(algo)
    return users


def _overrides(group: type, field: Field) -> str:
    """The algorithms whose default of ``field`` differs from its group's, with theirs."""
    changed = []
    for algo in _algorithms_with(group):
        mine = ALGORITHMS[algo].config_cls.field_default(field.name)
        if not isinstance(mine, NestedGroup) and mine != field.default:
            changed.append(f"{algo}: {_value(mine)}")
    return ", ".join(changed)


def _group_section(group: type, nested: dict[str, type[NestedGroup]]) -> list[str]:
    """The reference section of one group: its docstring, a table of its fields with the
    algorithms that use each and their own defaults, and any group it holds whole."""
    users = _users(group)
    fields = [f for f in _fields(group) if f.group is group]  # type: ignore[arg-type]
    rows = []
    for f in fields:
        used = users.get(f.name, [])
        scope = "all" if len(used) == len(ALGORITHMS) else ", ".join(used) or "none"
        changed = _overrides(group, f)
        note = f"{scope}" + (f"; defaults {changed}" if changed else "")
        rows.append(dataclasses.replace(f, extra=_cell(note)))
    doc = inspect.getdoc(group) or ""
    lines = [f"## {group.__name__}", "", f"`{group.__module__}.{group.__name__}`", "", doc, ""]
    lines += [fields_table(rows, extra="Used by"), ""]
    for name, held in nested.items():
        if any(f.name == name for f in fields):
            lines += [f"### `{name}`: {held.__name__}", "", inspect.getdoc(held) or "", ""]
            lines += [_nested(held, name), ""]
    return lines


def config_reference() -> str:
    """The whole config reference page: one section per field group, the groups of more
    algorithms first, then in the order of the configs' bases."""
    order: list[type] = []
    for algo in ALGORITHMS:
        for group in groups_of(algo):
            if group not in order:
                order.append(group)
    nested: dict[str, type[NestedGroup]] = {}
    for f in _fields(ALGORITHMS["ppo"].config_cls):
        held = ALGORITHMS["ppo"].config_cls.held_group(f.name)
        if held is not None and issubclass(held, NestedGroup):
            nested[f.name] = held
    shared = sorted(order, key=lambda g: (-len(_algorithms_with(g)), order.index(g)))
    total = sum(len([f for f in _fields(g) if f.group is g]) for g in shared)  # type: ignore[arg-type]
    lines = [
        "# Config reference",
        "",
        "Every field of every config, generated from the config classes when the site is built "
        f"({total} fields in {len(shared)} groups, and the groups `model` and `self_play` "
        "hold). A field is declared once, in one group; an algorithm's config is built from "
        "groups and may change a default (named in *Used by*). Set a field with a keyword "
        "(`PPOConfig(lr=1e-3)`), a YAML key (`lr: 0.001`), or `--set lr=0.001` on the "
        "command line; a group held whole takes dotted keys (`--set model.use_lstm=true`).",
        "",
    ]
    for group in shared:
        lines += _group_section(group, nested)
    return "\n".join(lines)
