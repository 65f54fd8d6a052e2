"""The MkDocs hook that adds the generated pages to the site (``mkdocs.yml``: ``hooks:``).

Generated when the site is built, never copied into ``docs/``:

- ``algorithms/index.md`` and ``algorithms/<name>.md`` for every algorithm of the registry
  (`algorithmref`): a new algorithm gets its page, its row and its place in the navigation
  from its registry entry and package alone;
- ``reference/config.md``, every field of every config (`configref`);
- ``reference/cli.md``, every command and flag, from the parser (`cliref`);
- ``results.md`` and its pictures, from what ``benchmarks/curves.py`` measured (`resultsref`);
- ``reference/api/<module>.md`` for every public module of ``rlflow`` (one that declares
  ``__all__``), rendered by mkdocstrings from the docstrings.

The navigation in ``mkdocs.yml`` holds the hand-written pages; `on_config` fills its
``Algorithms`` and ``API`` sections with the generated ones.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # the generators beside this file

from algorithmref import algorithm_page, algorithms_index, page_name
from cliref import cli_reference
from configref import config_reference
from mkdocs.structure.files import File, Files
from resultsref import pictures, results_page

import rlflow
from rlflow.algorithms import ALGORITHMS

API_SKIPPED = {"cli": "its reference is the command-line page", "version": "rlflow.__version__"}
"""Modules of ``rlflow`` that get no API page, and why."""


def api_modules() -> list[str]:
    """The dotted names of the modules with an API page: ``rlflow`` itself, then each of its
    modules and packages that declares ``__all__`` (not the skipped ones), by name."""
    names = ["rlflow"]
    for info in sorted(pkgutil.iter_modules(rlflow.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in API_SKIPPED:
            continue
        path = Path(rlflow.__path__[0]) / info.name
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if "\n__all__" in source.read_text():
            names.append(f"rlflow.{info.name}")
    return names


def api_page_name(module: str) -> str:
    """The site path of ``module``'s API page."""
    return f"reference/api/{module}.md"


def _shadowed(package: types.ModuleType, name: str) -> bool:
    """Whether ``name`` is a submodule of ``package`` that an exported object of the same name
    hides (``rlflow.ops.replay``, the module, under ``rlflow.ops.replay``, the function): the
    docstrings' reader sees the module there, Python the object."""
    submodules = {info.name for info in pkgutil.iter_modules(getattr(package, "__path__", []))}
    return name in submodules and not isinstance(getattr(package, name), types.ModuleType)


def _api_page(module: str) -> str:
    """An API page: the module's docstring and its public names (``__all__``, dunders such as
    ``__version__`` included), rendered by mkdocstrings; a submodule that ``__all__`` names
    (``rlflow.ops.keys``), or an object that a submodule's name hides, follows in a section of
    its own."""
    mod = importlib.import_module(module)
    exported = list(getattr(mod, "__all__", []))
    lines = [f"# `{module}`", "", f"::: {module}"]
    if any(name.startswith("__") for name in exported):
        lines += ["    options:", "      filters: []", f"      members: {exported}"]
    for name in exported:
        obj = getattr(mod, name)
        if isinstance(obj, types.ModuleType):
            path = obj.__name__
        elif _shadowed(mod, name):
            path = f"{obj.__module__}.{obj.__qualname__}"
        else:
            continue
        lines += ["", f"::: {path}", "    options:", "      show_root_heading: true"]
    return "\n".join(lines) + "\n"


def _generated() -> dict[str, str]:
    """Every generated page by its site path."""
    pages = {"algorithms/index.md": algorithms_index()}
    pages |= {page_name(algo): algorithm_page(algo) for algo in ALGORITHMS}
    pages["reference/config.md"] = config_reference()
    pages["reference/cli.md"] = cli_reference()
    pages["results.md"] = results_page()
    pages |= {api_page_name(m): _api_page(m) for m in api_modules()}
    return pages


def _fill(nav: list[Any], title: str, pages: list[Any]) -> None:
    """Put ``pages`` into the navigation section ``title`` (at any depth), after what it
    lists itself."""
    for item in nav:
        if isinstance(item, dict) and title in item:
            section = item[title]
            item[title] = (section if isinstance(section, list) else [section]) + pages
            return
        if isinstance(item, dict):
            for value in item.values():
                if isinstance(value, list):
                    _fill(value, title, pages)


def on_config(config: Any) -> Any:
    """Add the generated pages to the navigation."""
    algorithms = [{ALGORITHMS[a].config_cls.__name__.removesuffix("Config"): page_name(a)}
                  for a in ALGORITHMS]  # fmt: skip
    _fill(config["nav"], "Algorithms", algorithms)
    _fill(config["nav"], "API", [{m: api_page_name(m)} for m in api_modules()])
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages to the site's files."""
    generated: dict[str, str | bytes] = {**_generated(), **pictures()}
    for path, content in generated.items():
        files.append(File.generated(config, path, content=content))
    return files
