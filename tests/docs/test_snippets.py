"""Every code block of the documentation runs: the pages of ``docs/``, README.md, and the files
they include with pymdownx.snippets (``--8<-- "path"`` on its own line, relative to the repo).

What runs, per Markdown file:

- its ``python`` blocks, in order, in ONE fresh subprocess sharing one namespace (a notebook);
  each block is compiled with the filename ``FILE:LINE`` of its first line, so a traceback names
  the block. One test per file, its id the file.
- each ``bash`` / ``sh`` / ``shell`` block, as ``bash -euo pipefail``, one test per block (id
  ``FILE:LINE``), with the bin directory of this Python (``.venv/bin``) first on ``PATH``.

Both run with ``PYTHONPATH`` set to this checkout's ``src`` and a timeout (`DEFAULT_TIMEOUT_S`).
The runs of one file share one fresh temporary directory as their cwd: a bash block runs after
the file's earlier bash blocks (they run first if the test order put it earlier), the python
blocks after all of the file's bash blocks, so a page may train a run in one block and evaluate
it in the next. Other languages (yaml, text, console, plain fences) are not run.

Markers are HTML comment lines directly above a fence (invisible on the site), one or more:

- ``<!-- snippet: skip REASON -->``: not run; the reason is required.
- ``<!-- snippet: sub "FROM" "TO" -->``: run with every FROM replaced by TO (FROM must occur): the
  page shows what a user runs, the test a short version of it.
- ``<!-- snippet: cwd repo -->``: run in the repository root.
- ``<!-- snippet: file NAME -->`` (a block that is not run): written to NAME in the file's
  directory before its runs start.
- ``<!-- snippet: timeout SECONDS -->``.

An unknown or malformed marker, a marker with no fence below it, or an include that does not
exist fails `test_markers` of its file; a block's own bad marker fails its run too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 300.0
"""Seconds one run (a bash block, or a file's python blocks) may take unless a marker says."""
OUTPUT_TAIL = 4000
"""Characters of a failed run's output shown in the failure message."""

PYTHON = {"python", "py", "python3", "pycon"}
BASH = {"bash", "sh", "shell"}
MARKER = re.compile(r"^\s*<!--\s*snippet:(.*?)-->\s*$")
MARKER_START = re.compile(r"^\s*<!--\s*snippet\b")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
INCLUDE = re.compile(
    r'^(?P<indent>\s*)--8<--\s+"(?P<path>[^":]+)(?::(?P<start>\d*)(?::(?P<end>\d*))?)?"\s*$'
)
"""``--8<-- "file"``, or pymdownx.snippets' line range ``"file:start:end"`` (1-based, both
ends included; either may be left out)."""


class Line(NamedTuple):
    """One line of a page after includes are expanded, with where it was written."""

    text: str
    source: str
    number: int


@dataclass
class Block:
    """A fenced code block and the markers above it."""

    source: str
    """File (relative to the repo) and line of the block's first code line: ``FILE:LINE``."""
    lang: str
    code: str
    skip: str | None = None
    subs: list[tuple[str, str]] = field(default_factory=list)
    cwd_repo: bool = False
    file: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    problems: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``python``, ``bash`` or ``other`` (not run)."""
        return "python" if self.lang in PYTHON else "bash" if self.lang in BASH else "other"

    def runnable_code(self) -> str:
        """The code with the ``sub`` markers applied."""
        code = self.code
        for old, new in self.subs:
            code = code.replace(old, new)
        return code


@dataclass
class Page:
    """The blocks of one Markdown file (its includes expanded) and its marker problems."""

    name: str
    blocks: list[Block]
    problems: list[str]

    def of_kind(self, kind: str) -> list[Block]:
        return [b for b in self.blocks if b.kind == kind]


class Run(NamedTuple):
    ok: bool
    message: str


def expand(path: Path, root: Path, problems: list[str], depth: int = 0) -> list[Line]:
    """The lines of ``path`` with each ``--8<-- "file"`` line replaced by that file's lines
    (those of its line range, if it names one)."""
    name = relative(path, root)
    lines: list[Line] = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        match = INCLUDE.match(text)
        if match is None:
            lines.append(Line(text, name, number))
            continue
        target = root / match["path"]
        if not target.is_file():
            problems.append(f"{name}:{number}: included file {match['path']!r} does not exist")
        elif depth > 8:
            problems.append(f"{name}:{number}: includes nest deeper than 8 (a cycle?)")
        else:
            start, end = int(match["start"] or 1), int(match["end"] or 0) or None
            for line in expand(target, root, problems, depth + 1):
                if line.source == relative(target, root) and not (
                    start <= line.number <= (end or line.number)
                ):
                    continue
                lines.append(line._replace(text=match["indent"] + line.text))
    return lines


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def parse_marker(text: str, block: Block) -> None:
    """Apply one marker's body (what follows ``snippet:``) to ``block``."""
    kind, _, rest = text.strip().partition(" ")
    if kind == "skip":  # the reason is prose, taken as written
        reason = rest.strip()
        if not reason:
            block.problems.append("`snippet: skip` needs a reason: <!-- snippet: skip WHY -->")
        block.skip = reason or "(no reason given)"
        return
    try:
        args = shlex.split(rest)
    except ValueError as err:
        block.problems.append(f"marker {text.strip()!r} does not parse: {err}")
        return
    if kind == "sub" and len(args) == 2:
        if args[0] not in block.code:
            block.problems.append(f"`snippet: sub` text {args[0]!r} does not occur in the block")
        block.subs.append((args[0], args[1]))
    elif kind == "cwd" and args == ["repo"]:
        block.cwd_repo = True
    elif kind == "file" and len(args) == 1:
        if block.kind != "other":
            block.problems.append(
                f"`snippet: file` is for blocks that are not run, not {block.lang}"
            )
        block.file = args[0]
    elif kind == "timeout" and len(args) == 1 and re.fullmatch(r"\d+(\.\d+)?", args[0]):
        block.timeout_s = float(args[0])
    else:
        block.problems.append(
            f'unknown or malformed marker {text.strip()!r}: use skip REASON, sub "FROM" "TO", '
            "cwd repo, file NAME or timeout SECONDS"
        )


def parse_page(path: Path, root: Path = REPO) -> Page:
    """Collect the fenced blocks of the Markdown file ``path`` (includes expanded)."""
    problems: list[str] = []
    lines = expand(path, root, problems)
    blocks: list[Block] = []
    markers: list[Line] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if MARKER_START.match(line.text):
            if MARKER.match(line.text) is None:
                problems.append(f"{line.source}:{line.number}: a snippet marker must be one line")
            markers.append(line)
            i += 1
            continue
        fence = FENCE.match(line.text)
        if fence is None:
            if markers:
                where = f"{markers[0].source}:{markers[0].number}"
                problems.append(f"{where}: snippet marker with no fence directly below it")
            markers = []
            i += 1
            continue
        block, i = read_block(lines, i, fence)
        for marker in markers:
            body = MARKER.match(marker.text)
            if body is not None:
                parse_marker(body.group(1), block)
        problems.extend(f"{block.source}: {p}" for p in block.problems)
        blocks.append(block)
        markers = []
    return Page(relative(path, root), blocks, problems)


def read_block(lines: list[Line], start: int, fence: re.Match[str]) -> tuple[Block, int]:
    """The block whose opening fence is ``lines[start]``; and the index after its closing one."""
    indent, mark = len(fence["indent"]), fence["fence"]
    info = fence["info"].strip().lstrip("{").lstrip(".")
    lang = info.split()[0].rstrip("}").lower() if info else ""
    closing = re.compile(rf"^\s*{re.escape(mark[0])}{{{len(mark)},}}\s*$")
    body: list[str] = []
    i = start + 1
    while i < len(lines) and not closing.match(lines[i].text):
        text = lines[i].text
        body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
        i += 1
    first = lines[start + 1] if start + 1 < len(lines) else lines[start]
    block = Block(f"{first.source}:{first.number}", lang, "\n".join(body) + "\n")
    return block, i + 1


def pages(root: Path = REPO) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def environment() -> dict[str, str]:
    """This process's environment, this checkout's ``src`` on PYTHONPATH, our venv first on PATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run_process(argv: list[str], cwd: Path, timeout_s: float, what: str) -> Run:
    """Run ``argv``; on a timeout stop its process group (SIGTERM, then SIGKILL)."""
    start = time.monotonic()
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            output = stop_group(proc)
            return Run(False, f"{what} timed out after {timeout_s:.0f} s\n{tail(output)}")
    took = time.monotonic() - start
    if proc.returncode != 0:
        return Run(False, f"{what} failed (exit {proc.returncode}, {took:.1f} s)\n{tail(output)}")
    return Run(True, f"{what} passed in {took:.1f} s")


def stop_group(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the group of ``proc`` (rlflow then saves and stops its Ray), SIGKILL after 15 s."""
    for sig, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            output, _ = proc.communicate(timeout=wait_s)
            return output or ""
        except subprocess.TimeoutExpired:
            continue
    return ""


def tail(output: str) -> str:
    return output if len(output) <= OUTPUT_TAIL else "...\n" + output[-OUTPUT_TAIL:]


DRIVER = textwrap.dedent(
    """
    import json as _snip_json, linecache as _snip_linecache, os as _snip_os, sys as _snip_sys
    import traceback as _snip_traceback
    for _snip_block in _snip_json.loads(open(_snip_sys.argv[1]).read()):
        _snip_code, _snip_where = _snip_block["code"], _snip_block["where"]
        _snip_linecache.cache[_snip_where] = (
            len(_snip_code), None, _snip_code.splitlines(True), _snip_where)
        _snip_os.chdir(_snip_block["cwd"])
        try:
            exec(compile(_snip_code, _snip_where, "exec"), globals())
        except BaseException:
            _snip_traceback.print_exc()
            print("snippet failed: " + _snip_where, file=_snip_sys.stderr)
            _snip_sys.exit(1)
    """
)
"""Runs the blocks of a JSON file, each compiled as ``FILE:LINE``, in one ``__main__``."""


def run_python(page: Page, workdir: Path, root: Path = REPO) -> Run:
    """Run the python blocks of ``page`` in order in one subprocess, cwd ``workdir``."""
    blocks = [b for b in page.of_kind("python") if b.skip is None]
    bad = [p for b in blocks for p in b.problems]
    if bad:
        return Run(False, "\n".join(bad))
    spec = [
        {"code": b.runnable_code(), "where": b.source, "cwd": str(root if b.cwd_repo else workdir)}
        for b in blocks
    ]
    with tempfile.TemporaryDirectory(prefix="snippets-") as scratch:
        spec_path = Path(scratch) / "blocks.json"
        spec_path.write_text(json.dumps(spec))
        timeout_s = max(b.timeout_s for b in blocks)
        argv = [sys.executable, "-c", DRIVER, str(spec_path)]
        return run_process(argv, workdir, timeout_s, f"python blocks of {page.name}")


def run_bash(block: Block, workdir: Path, root: Path = REPO) -> Run:
    """Run one bash block with ``bash -euo pipefail``, cwd ``workdir`` (or the repo)."""
    if block.problems:
        return Run(False, "\n".join(block.problems))
    with tempfile.TemporaryDirectory(prefix="snippets-") as scratch:
        script = Path(scratch) / "block.sh"
        script.write_text(block.runnable_code())
        cwd = root if block.cwd_repo else workdir
        argv = ["bash", "-euo", "pipefail", str(script)]
        return run_process(argv, cwd, block.timeout_s, f"bash block {block.source}")


def write_files(page: Page, workdir: Path) -> None:
    """Write the page's ``snippet: file`` blocks into ``workdir``."""
    for block in page.blocks:
        if block.file is not None:
            target = workdir / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)


class PageRuns:
    """One page's shared workdir and the results of its bash blocks, each run at most once."""

    def __init__(self, page: Page, workdir: Path) -> None:
        self.page = page
        self.workdir = workdir
        self.results: dict[str, Run] = {}
        write_files(page, workdir)

    def bash(self, block: Block) -> Run:
        """Run ``block`` after the page's earlier bash blocks (they run first, once)."""
        for earlier in self.page.of_kind("bash"):
            if earlier.skip is None and earlier.source not in self.results:
                self.results[earlier.source] = run_bash(earlier, self.workdir)
            if earlier is block:
                break
        return self.results[block.source]

    def python(self) -> Run:
        """Run the page's python blocks after all of its bash blocks."""
        bash = [b for b in self.page.of_kind("bash") if b.skip is None]
        if bash:
            self.bash(bash[-1])
        return run_python(self.page, self.workdir)


# ---- collection ----------------------------------------------------------------------------

PAGES = {page.name: page for page in map(parse_page, pages())}


def chain_timeout(page: Page, upto: Block | None) -> float:
    """Seconds a test may need: its run and every earlier bash run it may have to start first."""
    total = 60.0
    for block in page.of_kind("bash"):
        if block.skip is None:
            total += block.timeout_s
        if block is upto:
            return total
    pythons = [b.timeout_s for b in page.of_kind("python") if b.skip is None]
    return total + max(pythons, default=0.0)


def python_params() -> list[object]:
    return [
        pytest.param(name, id=name, marks=pytest.mark.timeout(chain_timeout(page, None)))
        for name, page in PAGES.items()
        if page.of_kind("python")
    ]


def bash_params() -> list[object]:
    return [
        pytest.param(
            name, block, id=block.source, marks=pytest.mark.timeout(chain_timeout(page, block))
        )
        for name, page in PAGES.items()
        for block in page.of_kind("bash")
    ]


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PageRuns]:
    """Each page's `PageRuns`, made when a test first asks for it."""
    return {}


def runs_of(page_runs: dict[str, PageRuns], name: str, factory: pytest.TempPathFactory) -> PageRuns:
    if name not in page_runs:
        workdir = factory.mktemp(re.sub(r"[^\w]+", "_", name))
        page_runs[name] = PageRuns(PAGES[name], workdir)
    return page_runs[name]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(PAGES))
def test_markers(name: str) -> None:
    """Every marker of the page is known and well formed; every include exists."""
    assert not PAGES[name].problems, "\n".join(PAGES[name].problems)


@pytest.mark.ray
@pytest.mark.parametrize("name", python_params())
def test_python_blocks(
    name: str, page_runs: dict[str, PageRuns], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The page's python blocks run in order in one process, as a notebook would."""
    page = PAGES[name]
    skipped = [b.source for b in page.of_kind("python") if b.skip is not None]
    if len(skipped) == len(page.of_kind("python")):
        pytest.skip(f"every python block is skipped ({', '.join(skipped)})")
    run = runs_of(page_runs, name, tmp_path_factory).python()
    assert run.ok, run.message


@pytest.mark.ray
@pytest.mark.parametrize(("name", "block"), bash_params())
def test_bash_block(
    name: str,
    block: Block,
    page_runs: dict[str, PageRuns],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The bash block runs (after the page's earlier bash blocks) and exits 0."""
    if block.skip is not None:
        pytest.skip(f"{block.source}: {block.skip}")
    run = runs_of(page_runs, name, tmp_path_factory).bash(block)
    assert run.ok, run.message


# ---- the runner itself, on synthetic pages --------------------------------------------------


def write_page(tmp_path: Path, text: str) -> Page:
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(text))
    return parse_page(path, root=tmp_path)


@pytest.mark.timeout(60)
def test_a_failing_python_block_is_named_by_file_and_line(tmp_path: Path) -> None:
    page = write_page(
        tmp_path,
        """\
        # A page

        ```python
        x = 1
        ```

        ```python
        y = x + 1
        raise RuntimeError("boom")
        ```
        """,
    )
    run = run_python(page, tmp_path, root=tmp_path)
    assert not run.ok
    assert "page.md:8" in run.message and "boom" in run.message
    assert "snippet failed: page.md:8" in run.message


@pytest.mark.timeout(60)
def test_python_blocks_share_one_namespace_and_the_files_the_page_writes(tmp_path: Path) -> None:
    page = write_page(
        tmp_path,
        """\
        <!-- snippet: file settings.yaml -->
        ```yaml
        lr: 0.5
        ```

        ```python
        import yaml
        value = yaml.safe_load(open("settings.yaml"))["lr"]
        ```
        Some prose.

        <!-- snippet: sub "value * 2" "value * 4" -->
        ```python
        assert value * 2 == 2.0, value
        ```
        """,
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = PageRuns(page, workdir).python()
    assert run.ok, run.message


@pytest.mark.timeout(60)
def test_bash_blocks_fail_on_errors_and_see_earlier_blocks_output(tmp_path: Path) -> None:
    page = write_page(
        tmp_path,
        """\
        ```bash
        echo made > out.txt
        ```

        ```sh
        grep -q made out.txt
        ```

        - a list item with a block in it:

            ```shell
            missing_command_xyz | cat
            ```
        """,
    )
    _first, second, third = page.of_kind("bash")
    runs = PageRuns(page, tmp_path)
    assert runs.bash(second).ok  # runs the first block before it
    result = runs.bash(third)
    assert not result.ok and "page.md:12" in result.message  # pipefail: the pipe fails


@pytest.mark.timeout(60)
def test_bad_markers_are_problems(tmp_path: Path) -> None:
    page = write_page(
        tmp_path,
        """\
        <!-- snippet: skip -->
        ```bash
        echo 1
        ```

        <!-- snippet: sub "not there" "x" -->
        ```bash
        echo 2
        ```

        <!-- snippet: skp typo -->
        ```bash
        echo 3
        ```

        <!-- snippet: timeout 10 -->

        ```bash
        echo 4
        ```

        --8<-- "no/such/file.md"
        """,
    )
    text = "\n".join(page.problems)
    assert "page.md:3: `snippet: skip` needs a reason" in text
    assert "page.md:8: `snippet: sub` text 'not there' does not occur" in text
    assert "page.md:13: unknown or malformed marker 'skp typo'" in text
    assert "page.md:16: snippet marker with no fence directly below it" in text
    assert "included file 'no/such/file.md' does not exist" in text
    sub_block = page.of_kind("bash")[1]
    assert not run_bash(sub_block, tmp_path, root=tmp_path).ok


@pytest.mark.timeout(60)
def test_includes_are_expanded_and_keep_their_own_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "part.md").write_text(
        "intro\n\n<!-- snippet: timeout 7 -->\n```bash\necho in\n```\n"
    )
    (tmp_path / "code.py").write_text("print('included')\n")
    page = write_page(
        tmp_path,
        """\
        --8<-- "part.md"

        !!! note
            ```python
            --8<-- "code.py"
            ```
        """,
    )
    assert not page.problems
    bash, python = page.blocks
    assert (bash.source, bash.code, bash.timeout_s) == ("part.md:5", "echo in\n", 7.0)
    assert (python.source, python.code) == ("code.py:1", "print('included')\n")


@pytest.mark.timeout(60)
def test_an_include_with_a_line_range_takes_those_lines_only(tmp_path: Path) -> None:
    (tmp_path / "part.md").write_text("# Title\n\n```bash\necho a\n```\n\n```bash\necho b\n```\n")
    starting = write_page(tmp_path, '--8<-- "part.md:3:"\n')
    ending = write_page(tmp_path, '--8<-- "part.md:1:5"\n')
    assert not starting.problems and not ending.problems
    assert [b.code for b in starting.blocks] == ["echo a\n", "echo b\n"]
    assert [(b.source, b.code) for b in ending.blocks] == [("part.md:4", "echo a\n")]
