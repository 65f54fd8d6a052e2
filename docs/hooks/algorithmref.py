"""The algorithm pages, read from the registry and each algorithm's package.

An algorithm's page needs no hand-written Markdown: its title and summary come from its
registry entry (`rlflow.algorithms.ALGORITHMS`), its description from its package's docstring,
its plan from ``plan.py`` (the module docstring with the paper figure's numbered steps, the plan
function's source, and the graph `rlflow plan` draws of it, built on the local backend), its
config table from its config class (`configref`), its tuned configs from ``tuned/``.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from configref import algorithm_fields, fields_table, group_anchor, groups_of
from resultsref import algorithm_results
from rst_roles import markdown_of

from rlflow.algorithms import ALGORITHMS, AlgorithmSpec, tuned_config
from rlflow.config.files import TUNED_HARDWARE, tuned_config_path, tuned_envs
from rlflow.errors import ConfigError

__all__ = ["algorithm_page", "algorithms_index", "page_name"]

SRC = Path(importlib.import_module("rlflow").__file__ or "").parent
"""The ``rlflow`` package directory (the tuned configs are read as files, comments kept)."""


def page_name(algo: str) -> str:
    """The site path of ``algo``'s page."""
    return f"algorithms/{algo}.md"


def _title(spec: AlgorithmSpec) -> str:
    """The name an algorithm goes by (``PPO``, ``Ape-X``): its config class's name without
    ``Config``."""
    return spec.config_cls.__name__.removesuffix("Config")


def _plan_env(algo: str) -> str | None:
    """The env the page draws the plan for: the first tuned one that is not an Atari game (the
    small envs a reader tries first, whose workers start fast), else the first tuned one, else
    the config's default."""
    envs = tuned_envs(algo)
    small = [env for env in envs if not env.startswith("ALE/")]
    return (small or envs or [None])[0]


def _plan_figure(algo: str) -> list[str]:
    """The plan graph as `rlflow plan` builds it (local backend), as an inline SVG; or why not."""
    from rlflow.cli.dataflow import RunDataflow
    from rlflow.cli.plan_html import plan_svg
    from rlflow.trainer import Trainer

    env = _plan_env(algo)
    command = f"rlflow plan {algo}" + (f" --env {env}" if env else "")
    try:
        config = tuned_config(algo, env) if env else ALGORITHMS[algo].config_cls()
        with Trainer(algo, config=config, backend="local") as trainer:
            graph = trainer.plan_graph()
    except ConfigError as err:
        return [
            f"`{command}` draws the graph of the built plan; it needs more than a default "
            f"config here ({markdown_of(str(err))}).",
            "",
        ]
    svg = plan_svg(RunDataflow.unmeasured(graph, algo, env or ""))
    return [
        f"The plan as built (`{command}`; `rlflow plan RUN_DIR` adds each stage's measured "
        "throughput):",
        "",
        f'<div class="rlflow-plan">{svg}</div>',
        "",
    ]


def _tuned_section(algo: str) -> list[str]:
    """Every tuned config shipped for ``algo``, with the command that uses it."""
    lines: list[str] = []
    for hardware in TUNED_HARDWARE:
        for env in tuned_envs(algo, hardware):
            flag = "" if hardware == "cpu" else f" --tuned-for {hardware}"
            path = tuned_config_path(algo, env, hardware)
            assert path is not None, (algo, env, hardware)
            lines += [
                f"### {env}" + ("" if hardware == "cpu" else f" ({hardware})"),
                "",
                f"`rlflow train {algo} --env {env}{flag}` applies "
                f"`{path.relative_to(SRC.parent)}`:",
                "",
                "```yaml",
                path.read_text().rstrip(),
                "```",
                "",
            ]
    if not lines:
        return ["None ships yet: the config's defaults (below) apply.", ""]
    return lines


def _config_section(algo: str) -> list[str]:
    """The config table: the algorithm's own and family fields in full, with this algorithm's
    defaults; the groups every algorithm shares folded."""
    fields = algorithm_fields(algo)
    lines: list[str] = []
    shared = set(groups_of("pg")) & set(groups_of("dqn"))
    for group in groups_of(algo):
        mine = [f for f in fields if f.group is group]
        if not mine:
            continue
        ref = f"../reference/config.md#{group_anchor(group)}"
        if group in shared:
            lines += [f'??? note "{group.__name__}: {len(mine)} fields every algorithm has"', ""]
            lines += ["    " + row for row in fields_table(mine).splitlines()]
            lines += ["", f"    All of them: [{group.__name__}]({ref}).", ""]
        else:
            lines += [f"### {group.__name__}", "", f"[In the config reference]({ref}).", ""]
            lines += [fields_table(mine), ""]
    return lines


def algorithm_page(algo: str) -> str:
    """The page of ``algo``."""
    spec = ALGORITHMS[algo]
    package = importlib.import_module(f"rlflow.algorithms.{algo}")
    plan_module = importlib.import_module(spec.plan.__module__)
    policy, config = spec.policy_cls, spec.config_cls
    lines = [
        f"# {_title(spec)}",
        "",
        f"*{spec.summary}.*",
        "",
        markdown_of(inspect.getdoc(package) or ""),
        "",
        "| Part | Where |",
        "|---|---|",
        f"| Train | `rlflow train {algo} --env ENV` |",
        f"| Config | `{config.__module__}.{config.__name__}` |",
        f"| Policy | `{policy.__module__}.{policy.__name__}` |",
        f"| Plan | `{spec.plan.__module__}.{spec.plan.__name__}` |",
        f"| Reads recorded experience | {'yes' if spec.reads_input else 'no'} |",
        "",
        "## The plan",
        "",
        markdown_of(inspect.getdoc(plan_module) or ""),
        "",
        "```python",
        inspect.getsource(spec.plan).rstrip(),
        "```",
        "",
        *_plan_figure(algo),
        *algorithm_results(algo),
        "## Tuned configs",
        "",
        *_tuned_section(algo),
        "## Config",
        "",
        f"`{config.__name__}`'s fields with {_title(spec)}'s defaults (set them as keywords, "
        "YAML keys or `--set KEY=VALUE`).",
        "",
        *_config_section(algo),
    ]
    return "\n".join(lines)


def algorithms_index() -> str:
    """The table of every algorithm: its page, summary, config, policy, plan and tuned envs."""
    rows = [
        "| Algorithm | What | Config | Policy | Tuned for |",
        "|---|---|---|---|---|",
    ]
    for algo, spec in ALGORITHMS.items():
        envs = ", ".join(f"`{env}`" for env in tuned_envs(algo)) or "-"
        policy = spec.policy_ref if isinstance(spec.policy_ref, str) else spec.policy_cls.__name__
        rows.append(
            f"| [{_title(spec)}]({algo}.md) | {spec.summary} | `{spec.config_cls.__name__}` "
            f"| `{str(policy).rsplit(':', 1)[-1]}` | {envs} |"
        )
    return "\n".join(
        [
            "# Algorithms",
            "",
            f"The {len(ALGORITHMS)} algorithms of the registry (`rlflow.algorithms.ALGORITHMS`;"
            " `rlflow list` prints the same), each a plan in `rlflow/algorithms/<name>/plan.py`"
            " written like the paper's figures. This table and every algorithm's page are "
            "generated from the registry and the algorithm's package when the site is built.",
            "",
            *rows,
            "",
        ]
    )
