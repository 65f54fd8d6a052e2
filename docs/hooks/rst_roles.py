"""rlflow's docstrings as Markdown: Sphinx roles become code spans, examples code blocks.

The docstrings are written for ``help()``, doctest and Sphinx-style readers
(``:class:`TorchPolicy```, ``text::`` before an indented example, ``>>>`` examples); the site
renders Markdown. `markdown_of` rewrites the three constructs; `RstRoles` is the griffe
extension that applies it to every docstring mkdocstrings renders (``mkdocs.yml``:
``extensions: [docs/hooks/rst_roles.py:RstRoles]``), and the page generators call it on the
docstrings they show.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["RstRoles", "markdown_of"]

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc|const|ref):`~?([^`]+)`")
_LITERAL_INTRO = re.compile(r"(\S)\s*::$", re.M)


def _fence_examples(text: str) -> str:
    """Each run of doctest lines (a ``>>>`` line to the next blank line) in a ``pycon`` fence,
    at the run's indentation."""
    out: list[str] = []
    indent: str | None = None  # the open fence's, or None
    for line in text.splitlines():
        stripped = line.lstrip()
        if indent is None and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out += ["", f"{indent}```pycon"]
        elif indent is not None and not stripped:
            out.append(f"{indent}```")
            indent = None
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


def markdown_of(text: str) -> str:
    """``text`` with Sphinx roles as code spans (``:class:`~a.B``` -> `` `B` ``, the ``~``
    form keeping the last name), doctest examples in code blocks, and each paragraph ending in
    ``::`` ending in ``:`` (its indented block after a blank line is a Markdown code block
    already)."""

    def role(match: re.Match[str]) -> str:
        target = match.group(1)
        full = match.group(0)
        shown = target.rsplit(".", 1)[-1] if ":`~" in full else target
        return f"`{shown}`"

    text = _fence_examples(_ROLE.sub(role, text))
    return _LITERAL_INTRO.sub(lambda m: m.group(1) + ":", text)


class RstRoles(griffe.Extension):
    """Rewrite each docstring with `markdown_of` as griffe reads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called by griffe for every object it creates."""
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
