"""Package attributes imported on first use (PEP 562), so a package's light parts load alone.

An algorithm package (``rlflow.algorithms.ppo``) exports its config class, its policy and its
plan. The config is plain Python; the policy and the plan import torch, Ray-facing workers and
the operators, about 1.5 s on a small machine. The command line checks a run's config (and
refuses a bad one) with the configs alone, then starts Ray while torch is imported beside it.
So each package imports its config at once and names the rest in :func:`lazy_exports`: the
first ``package.PPOPolicy`` (or ``from package import PPOPolicy``) imports the submodule that
defines it, and the package keeps the value from then on.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "resolve_ref"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose attributes ``exports`` maps to the
    submodule (relative to the package) that defines each.

    Example (in ``rlflow/algorithms/ppo/__init__.py``)::

        __getattr__, __dir__ = lazy_exports(__name__, {"PPOPolicy": "policy", "ppo_plan": "plan"})
    """
    table = dict(exports)

    def get_attribute(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups find it directly
        return value

    def names() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return get_attribute, names


def resolve_ref(ref: Any) -> Any:
    """``ref`` itself, or the attribute that a ``"module:attribute"`` string names (the module
    is imported).

    >>> resolve_ref("collections:OrderedDict").__name__
    'OrderedDict'
    >>> resolve_ref(len) is len
    True
    """
    if not isinstance(ref, str):
        return ref
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)
