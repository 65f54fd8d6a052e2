"""``plan.json`` in the run dir and ``rlflow plan RUN_DIR [--html]``: the measured dataflow."""

from __future__ import annotations

import json
import shutil
import subprocess
from html import escape
from pathlib import Path

import pytest

from rlflow.cli import main
from rlflow.cli.dataflow import load_dataflow
from rlflow.cli.plan_html import layout, render_html
from rlflow.flow import PlanGraph, PlanNode
from rlflow.loggers import write_plan

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def run_dir(ppo_run_dir: Path) -> Path:
    return ppo_run_dir


def _graph() -> PlanGraph:
    """source -> a -> union <- b <- source2 (ids fixed, as if read from a run dir)."""
    src = PlanNode("from_actors", "workers", "source", (), 1)
    a = PlanNode("for_each", "for_each(A)", "stage", (src,), 2)
    src2 = PlanNode("from_items", "items", "source", (), 3)
    b = PlanNode("for_each", "for_each(B)", "stage", (src2,), 4)
    union = PlanNode("union", "union(async)", "union", (a, b), 5)
    return PlanGraph.ending_at(union)


def _row(iteration: int, total_s: float, this_s: float, a: int, a_s: float) -> str:
    stages = {
        "for_each(A)#2": {"items": a, "fn_time_s": a_s, "wait_time_s": 0.0},
        "for_each(B)#4": {"items": 2 * a, "fn_time_s": 0.0, "wait_time_s": a_s / 2},
    }
    return json.dumps({"iteration": iteration, "time_total_s": total_s,
                       "time_this_iter_s": this_s, "stages": stages})  # fmt: skip


def test_plan_graph_round_trips_through_json_with_its_ids() -> None:
    graph = _graph()
    back = PlanGraph.from_dict(json.loads(json.dumps(graph.to_dict())))
    assert [n.key for n in back.nodes] == [n.key for n in graph.nodes]
    assert back.edges == graph.edges
    assert back.to_mermaid() == graph.to_mermaid()
    with pytest.raises(ValueError, match="not a saved plan graph"):
        PlanGraph.from_dict({"nodes": [{"id": 1}]})


def test_numbers_come_from_the_latest_trainer_rows(tmp_path: Path) -> None:
    write_plan(tmp_path, _graph(), algorithm="x")
    rows = [
        _row(1, 10.0, 10.0, 50, 5.0),  # first trainer
        _row(2, 12.0, 2.0, 4, 0.5),  # restored: counts start again
        _row(3, 14.0, 2.0, 8, 1.0),
    ]
    (tmp_path / "progress.jsonl").write_text("\n".join(rows) + "\n")
    measured = load_dataflow(tmp_path)
    assert (measured.first_iteration, measured.last_iteration) == (2, 3)
    assert measured.elapsed_s == pytest.approx(4.0)  # 14 - (12 - 2)
    a, b = measured.stages["for_each(A)#2"], measured.stages["for_each(B)#4"]
    assert (a.items_per_s, a.share) == (pytest.approx(2.0), pytest.approx(0.25))
    assert (b.items_per_s, b.share) == (pytest.approx(4.0), pytest.approx(0.125))
    assert measured.bottleneck == "for_each(A)#2"
    assert "workers#1" not in measured.stages  # a source has no statistics of its own


def test_layout_puts_readers_below_and_boxes_apart() -> None:
    graph = _graph()
    where = layout(graph)
    for src, dst in graph.edges:
        assert where[dst][1] > where[src][1]
    assert len(set(where.values())) == len(graph.nodes)


def test_run_dir_gets_plan_json_and_plan_html_shows_every_stage(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = json.loads((run_dir / "plan.json").read_text())
    assert saved["algorithm"] == "ppo"
    out = tmp_path / "plan.html"
    assert main(["plan", str(run_dir), "--html", str(out)]) == 0
    text = capsys.readouterr().out
    page = out.read_text()
    measured = load_dataflow(run_dir)
    assert "TrainOneStep" in measured.bottleneck  # type: ignore[operator]
    assert f"{measured.bottleneck}  " in text and "<- bottleneck" in text
    for node in measured.graph.nodes:
        assert escape(node.key) in page
        stats = measured.stages.get(node.key)
        if stats is not None:
            assert f"{stats.items_per_s:.2f}</td>" in page
            assert f"{stats.share:.1%}</td>" in page
            assert stats.items > 0
    assert '<tr class="bottleneck"><td>' + escape(measured.bottleneck or "") in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in page


def test_plan_of_a_dir_without_plan_json_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(tmp_path)]) == 2
    assert "plan.json: no saved plan" in capsys.readouterr().err


def _colours(png: Path) -> int:
    from PIL import Image

    with Image.open(png) as image:
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or ())


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="no chromium binary (CI installs it in .ci/run: apt-get install chromium)",
)
def test_headless_chromium_draws_the_page(run_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    page.write_text(render_html(load_dataflow(run_dir)))
    png = tmp_path / "shot.png"
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
         "--window-size=1200,900", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert png.is_file()
    assert _colours(png) > 10  # text, tints and the red outline: far from one colour


def test_plan_of_an_algorithm_draws_its_graph_unmeasured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pg.html"
    assert main(["plan", "pg", "--env", "CartPole-v1", "--html", str(out)]) == 0
    mermaid = capsys.readouterr().out
    page = out.read_text()
    assert "Not measured" in page and 'class="bottleneck"' not in page and "#d00" not in page
    assert "TrainOneStep" in mermaid and "for_each(TrainOneStep)" in page
