"""The bench report groups runs by shape — a rate sweep, a concurrency sweep, the single runs — and sorts them by
number, on files the tools wrote themselves (tests/metrics/data/real): vLLM's rate sweep at 10, 40 and 4 req/s
beside an unrelated c16 run with the same label, GuideLLM's sweep (synchronous, throughput and two constant rates in
one file), AIPerf's concurrency sweep and two rate runs. Before, the report drew one curve per label: the c16 run on
the rate sweep's line, GuideLLM's three strategies on one line ordered c1, 44.6 req/s, 69.2 req/s, c512, AIPerf's
runs not at all (one label per folder), and the table read 10, 4, 40 req/s."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

from servetune.metrics.imports import find_runs
from servetune.report.bench import render_bench_html, shapes, write_bench_report

REAL = Path(__file__).resolve().parents[1] / "metrics" / "data" / "real"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "real"
    shutil.copytree(REAL, out)
    write_bench_report(out, find_runs(out), "real files")
    return out


def test_runs_are_grouped_by_shape_and_sorted_by_number(folder: Path) -> None:
    found = [(shape.title, [r.source.level_text for r in shape.runs]) for shape in shapes(find_runs(folder))]
    assert found == [
        ("rate sweep: mock-sweep (vllm bench serve)", ["4 req/s", "10 req/s", "40 req/s"]),
        ("rate sweep: guidellm sweep (constant) (GuideLLM)", ["44.6 req/s", "69.2 req/s"]),
        ("concurrency sweep: aiperf mock (AIPerf)", ["c1", "c2", "c4"]),
        ("rate sweep: aiperf mock (AIPerf)", ["10 req/s", "40 req/s"]),
        ("single runs", ["c1", "c16", "c512"]),
    ]
    rows = list(csv.DictReader((folder / "runs.csv").open()))
    assert [(r["tool"], r["shape"], r["level"]) for r in rows][:3] == [
        ("vllm", "rate sweep", "4.0"), ("vllm", "rate sweep", "10.0"), ("vllm", "rate sweep", "40.0"),
    ]  # fmt: skip
    assert [r["run"] for r in rows if r["shape"] == "single runs"] == [
        "guidellm sweep (synchronous)", "mock-sweep", "guidellm sweep (throughput)",
    ]  # fmt: skip


def test_each_sweep_is_one_curve_named_with_its_tool(folder: Path) -> None:
    html = (folder / "report.html").read_text()
    curves = html[html.index("<h2>Latency–throughput</h2>") : html.index("<h2>Distributions</h2>")]
    charts = curves.split("<svg")[1:]
    assert len(charts) == 2
    for chart in charts:
        assert chart.count("<polyline") == 4, "one line per sweep, none through a single run"
        legend = re.findall(r"<text[^>]*>([^<]*\((?:vllm bench serve|GuideLLM|AIPerf)\))</text>", chart)
        assert any("aiperf mock (AIPerf)" in name for name in legend), legend
        assert any("GuideLLM" in name for name in legend) and any("vllm bench" in name for name in legend)
    table = html[html.index('id="runs"') : html.index("</table>")]
    assert table.count('<tr class="shape">') == 5 and table.count('<tr class="run">') == 13
    levels = re.findall(r'<td class="name">([^<]*req/s|c\d+)</td>', table)
    assert levels[:3] == ["4 req/s", "10 req/s", "40 req/s"]


def test_a_label_shared_by_a_sweep_and_a_single_run_draws_the_sweep_alone() -> None:
    runs = [r for r in find_runs(REAL / "vllm")]
    assert {r.source.label for r in runs} == {"mock-sweep"}
    (sweep, single) = shapes(runs)
    assert [r.source.level for r in sweep.runs] == [4.0, 10.0, 40.0]
    assert [r.source.level_text for r in single.runs] == ["c16"]
    assert "c16" in render_bench_html(runs, "vllm")
