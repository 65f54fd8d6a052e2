"""The command-line reference, read from the parser the ``rlflow`` command itself uses."""

from __future__ import annotations

import argparse

from rlflow.cli.parser import build_parser

__all__ = ["cli_reference"]


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    """How an argument is written: ``--env ENV``, ``--tuned, --no-tuned``, ``ALGO``."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    if action.nargs == 0:
        return ", ".join(f"`{flag}`" for flag in action.option_strings)
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    return ", ".join(f"`{flag} {metavar}`" for flag in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An argument's help as ``--help`` prints it (``%(default)s`` expanded)."""
    formatter = parser._get_formatter()
    return formatter._expand_help(action) if action.help else ""


def _table(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments of ``parser`` as a Markdown table (``--help`` and ``--version`` left out:
    every command has the first, the page says the second)."""
    rows = ["| Argument | Description |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        rows.append(f"| {_flags(action)} | {_cell(_help(parser, action))} |")
    return rows


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-command parsers of ``parser`` by name, in the order ``--help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The one-line help of each sub-command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def cli_reference() -> str:
    """The command-line reference page: usage and arguments of every sub-command."""
    parser = build_parser()
    summaries = _summaries(parser)
    lines = [
        "# Command line",
        "",
        "`rlflow` and its sub-commands, generated from the parser the command itself uses "
        "(`rlflow.cli.parser.build_parser`) when the site is built; `rlflow COMMAND --help` "
        "prints the same.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        *_table(parser),
        "",
    ]
    for name, sub in _subcommands(parser).items():
        lines += [f"## `rlflow {name}`", "", summaries.get(name, "").capitalize() + ".", ""]
        if sub.description:
            lines += [sub.description, ""]
        lines += ["```text", sub.format_usage().strip(), "```", "", *_table(sub), ""]
    return "\n".join(lines)
