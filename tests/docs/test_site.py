"""The documentation site: it builds strictly, its links resolve, its API reference is complete,
and a real browser renders it and finds "PPO" with the site's search.

The site is built once for the module (``mkdocs build --strict``, the command of ``make docs``),
in a subprocess: the build imports rlflow and builds each algorithm's plan on the local backend.
The browser is the Chromium that ``.ci/run`` installs, driven headless over the DevTools protocol
(a few commands: navigate, evaluate, type, screenshot); its screenshots are kept under
``build/test-artifacts/``.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import importlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "test-artifacts"
"""Where the browser's screenshots are kept (``/build/`` is ignored by git)."""
REFERENCED_PACKAGES = ("rlflow", "rlflow.flow", "rlflow.ops", "rlflow.config")
"""Every name these export (``__all__``) must have an entry in the API reference."""

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as ``make docs`` builds it (strict: a warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_MKDOCS_2_WARNING": "1"}
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=480, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_the_site_has_every_page_of_the_navigation(site: Path) -> None:
    from rlflow.algorithms import ALGORITHMS

    pages = ("getting-started", "reference/config", "reference/cli", "algorithms", "benchmarks")
    for page in ("", *pages):
        assert (site / page / "index.html").is_file(), page
    drawn = []
    for algo in ALGORITHMS:  # generated from the registry: one page each
        page = (site / "algorithms" / algo / "index.html").read_text()
        assert f"rlflow train {algo}" in page and f"{algo}_plan" in page
        drawn += [algo] if "<svg" in page else []
    assert len(drawn) >= len(ALGORITHMS) - 3  # the offline ones need recorded data to build


# ----------------------------------------------------------------------------- links


class _Links(HTMLParser):
    """The ``href``/``src`` targets and the ``id``s of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and (name == "href" or (name == "src" and tag != "script")):
                self.targets.append(value)
            if name == "id" and value:
                self.ids.add(value)


@functools.cache
def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text())
    return parser


def _resolve(site: Path, page: Path, target: str) -> tuple[Path, str] | None:
    """The file and anchor an internal link of ``page`` points at; None for an external one."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith(("mailto:", "data:")):
        return None
    path, anchor = urldefrag(target)
    base = site if path.startswith("/") else page.parent  # 404.html links from the root
    where = (base / unquote(path).lstrip("/")).resolve() if path else page
    if where.is_dir():
        where = where / "index.html"
    return where, unquote(anchor)


def test_no_internal_link_is_broken(site: Path) -> None:
    broken = []
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        for target in _parse(page).targets:
            resolved = _resolve(site, page, target)
            if resolved is None:
                continue
            where, anchor = resolved
            if not where.is_file() or site.resolve() not in where.parents:
                broken.append(f"{page.relative_to(site)}: {target} (no such file)")
            elif anchor and where.suffix == ".html" and anchor not in _parse(where).ids:
                broken.append(f"{page.relative_to(site)}: {target} (no such anchor)")
    assert len(pages) > 40
    assert not broken, "\n".join(broken[:40])


# ---------------------------------------------------------------------- API reference


def _inventory(site: Path) -> set[str]:
    """The names in the site's ``objects.inv`` (Sphinx's inventory format, which mkdocstrings
    writes: four header lines, then zlib-compressed ``name domain:role priority uri name``)."""
    data = (site / "objects.inv").read_bytes()
    body = zlib.decompress(data.split(b"\n", 4)[4]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line}


def test_every_public_name_is_in_the_api_reference(site: Path) -> None:
    documented = _inventory(site)
    missing = []
    for package in REFERENCED_PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            own = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
            if f"{package}.{name}" not in documented and own not in documented:
                missing.append(f"{package}.{name}")
    assert len(documented) > 1000
    assert not missing, f"not in the API reference: {missing}"


def test_the_config_reference_has_every_field_of_every_algorithm(site: Path) -> None:
    from rlflow.algorithms import ALGORITHMS

    page = (site / "reference" / "config" / "index.html").read_text()
    shown = set(re.findall(r"<td><code>([\w.]+)</code></td>", page))
    for spec in ALGORITHMS.values():
        for name in spec.config_cls.field_names():
            assert name in shown, f"{spec.config_cls.__name__}.{name}"
    assert "model.use_lstm" in shown and "self_play.snapshot_every" in shown


def test_the_cli_reference_has_every_flag_of_the_parser(site: Path) -> None:
    from rlflow.cli.parser import build_parser

    page = (site / "reference" / "cli" / "index.html").read_text()
    for action in build_parser()._subparsers._group_actions[0].choices["train"]._actions:  # type: ignore[union-attr]
        for flag in action.option_strings:
            if flag not in ("-h", "--help"):
                assert f"<code>{flag}" in page, flag


# --------------------------------------------------------------------------- browser


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the browser's console, not the server's log."""


@contextlib.contextmanager
def _served(folder: Path) -> Iterator[str]:
    """``folder`` served on a free port of 127.0.0.1 (the site's search loads its index with
    ``fetch``, which a ``file://`` page may not do)."""
    handler = functools.partial(_Handler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Browser:
    """Headless Chromium driven over the DevTools protocol: one page, its console errors."""

    FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1280,900")  # fmt: skip

    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        self._proc = subprocess.Popen(
            ["chromium", *self.FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        url = self._devtools_url()
        self._stack = contextlib.ExitStack()
        self._ws = self._stack.enter_context(connect(url, max_size=64 * 2**20, open_timeout=30))
        self._ids = itertools.count(1)
        self.errors: list[str] = []
        target = self._call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def _devtools_url(self) -> str:
        assert self._proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                threading.Thread(target=self._proc.stderr.read, daemon=True).start()  # drain
                return found.group(1)
            if not line and self._proc.poll() is not None:
                break
        raise AssertionError("chromium did not start its DevTools server")

    def _note(self, message: dict[str, Any]) -> None:
        """Keep the page's errors: exceptions, console.error, failed loads."""
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params["exceptionDetails"])[:500])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(json.dumps(params.get("args"))[:500])
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"{entry.get('text')} {entry.get('url', '')}")

    def _call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        key = next(self._ids)
        message: dict[str, Any] = {"id": key, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == key:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return dict(reply.get("result", {}))
            self._note(reply)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """A DevTools command on the page."""
        return self._call(method, self._session, **params)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {expression}")

    def open(self, url: str) -> None:
        """Navigate and wait until the page has loaded."""
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stack.close()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=20)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    if shutil.which("chromium") is None:
        pytest.skip("no chromium binary (CI installs it in .ci/run: apt-get install chromium)")
    driver = Browser(tmp_path / "profile")
    try:
        yield driver
    finally:
        driver.close()


def _colours(png: Path) -> int:
    from PIL import Image

    with Image.open(png) as image:
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or ())


def test_a_browser_renders_the_site_and_its_search_finds_ppo(site: Path, browser: Browser) -> None:
    with _served(site) as base:
        browser.open(f"{base}/")
        assert browser.evaluate("document.querySelector('h1').textContent").strip()
        assert browser.evaluate("document.querySelectorAll('.md-nav__link').length") > 30
        home = browser.screenshot(ARTIFACTS / "docs-home.png")

        browser.open(f"{base}/algorithms/ppo/")
        assert browser.evaluate("document.querySelector('h1').textContent").startswith("PPO")
        assert browser.evaluate("document.querySelectorAll('.rlflow-plan svg rect').length") > 5
        ppo = browser.screenshot(ARTIFACTS / "docs-ppo.png")

        browser.evaluate("document.querySelector('.md-search__input').focus()")
        browser.call("Input.insertText", text="PPO")
        titles = browser.wait_for(
            "Array.from(document.querySelectorAll('.md-search-result__item h1, "
            ".md-search-result__item h2')).map(e => e.textContent)"
        )
        browser.screenshot(ARTIFACTS / "docs-search-ppo.png")
    assert any("PPO" in title for title in titles), titles
    assert not browser.errors, browser.errors
    assert _colours(home) > 50 and _colours(ppo) > 50  # text, code and the figure: not blank


def test_the_results_page_shows_every_measured_case_with_its_picture(site: Path) -> None:
    summary = json.loads((ROOT / "benchmarks/results/curves/summary.json").read_text())
    page = (site / "results" / "index.html").read_text()
    measured = {k: c for k, c in summary["cases"].items() if not c["quick"]}
    assert measured, "benchmarks/curves.py has measured no case"
    for key, case in measured.items():
        assert key in page and f'src="{case["picture"]}"' in page, key
        assert (site / "results" / case["picture"]).read_bytes().startswith(b"\x89PNG")
    assert summary["machine"]["cpu"] in page
    ppo = (site / "algorithms" / "ppo" / "index.html").read_text()
    assert "ppo:CartPole-v1" in ppo and "ppo_CartPole-v1.png" in ppo  # its own page too
    # Published results, measured here or not: the zoo's SAC on HalfCheetah (1M steps, days on
    # this CPU), RLlib's IMPALA on Breakout at 10M steps, each with its source's link.
    assert "9,535.5 ± 100.5 at 1M" in page and "HalfCheetah-v3" in page
    assert "385.0 at 10M" in page and "ray-project/rl-experiments/blob/07e4acfb" in page
