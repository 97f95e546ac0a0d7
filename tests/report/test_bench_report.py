"""The bench report in headless Chromium at 1280 px: a bench folder holding a servetune sweep over a traffic mix with a
warm-up, a run with failed requests, and runs imported from GuideLLM, AIPerf and vLLM; `servetune report DIR`
draws it. What must be visible: the warnings first, the runs table whole, the sweep's curve with its levels
written on it, the four distributions, each run's time series with the warm-up shaded, the per-class table."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import boxes, browser_page, output_dir

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "metrics" / "data"
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
SERVETUNE = [sys.executable, "-m", "servetune"]


def _mock(*faults: str) -> tuple[subprocess.Popen[str], str]:
    args = [*SERVETUNE, "mock-server", "--port", "0", "--ttft-ms", "20", "--itl-ms", "3"]
    for fault in faults:
        args += ["--fault", fault]
    server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=ENV)
    assert server.stderr is not None
    return server, server.stderr.readline().split()[4]


def _bench(url: str, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    line = [*SERVETUNE, "bench", "--base-url", url, "--model", "mock", "--save-result", "--save-detailed",
            "--result-dir", str(out), "--disable-tqdm", *flags]  # fmt: skip
    return subprocess.run(line, capture_output=True, text=True, env=ENV, timeout=300)


@pytest.fixture(scope="module")
def bench_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("bench")
    server, url = _mock()
    try:
        # The folder is the report's input, not a verdict on the runs: a client starved of CPU (a loaded machine)
        # adds a validity warning, which the report draws like any other instead of failing the fixture.
        sweep = _bench(url, out, "--mix", "chat:0.7:64:16,rag:0.3:512:32", "--concurrency", "1", "--sweep", "1,2,4",
                       "--num-prompts", "30", "--num-warmups", "6", "--label", "mix-sweep", "--accept-warnings")  # fmt: skip
        assert sweep.returncode == 0, sweep.stderr
    finally:
        server.terminate()
        server.wait(10)
    server, url = _mock("status:status=500:every=5")
    try:
        flaky = _bench(url, out, "--max-concurrency", "4", "--num-prompts", "20", "--random-input-len", "64",
                       "--random-output-len", "16", "--label", "flaky", "--max-error-rate", "0.5", "--accept-warnings")  # fmt: skip
        assert flaky.returncode == 0, flaky.stderr
    finally:
        server.terminate()
        server.wait(10)
    imported = subprocess.run(
        [*SERVETUNE, "import", str(DATA / "guidellm_benchmarks.json"), str(DATA / "aiperf-c2"), "--into", str(out)],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    report = subprocess.run([*SERVETUNE, "report", str(out)], capture_output=True, text=True, env=ENV, timeout=120)
    assert report.returncode == 0, report.stderr
    yield out


def test_bench_report_html(bench_folder: Path) -> None:
    html = (bench_folder / "report.html").read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', ""), "one static file, no network"
    assert "<script" not in html
    for tool in ("servetune bench", "GuideLLM", "AIPerf"):
        assert tool in html
    assert html.index('id="warnings"') < html.index('id="runs"')


@pytest.mark.browser
def test_bench_report_in_chromium_at_1280px(bench_folder: Path) -> None:
    with browser_page((bench_folder / "report.html").as_uri(), width=1280) as (loop, page):
        loop.run_until_complete(page.screenshot(output_dir() / "bench-report-1280.png"))
        (warnings,) = boxes(loop, page, "#warnings")
        assert warnings["top"] < 200 and warnings["right"] <= 1280, "the warnings are the first thing on the page"
        assert "failed" in warnings["text"] and "ITL approximated" in warnings["text"]
        (table,) = boxes(loop, page, "#runs")
        assert table["right"] <= 1280, "the runs table fits the width"
        rows = boxes(loop, page, "#runs tr.run")
        assert len(rows) == 3 + 1 + 2  # the sweep's three levels, the flaky run, two imported runs
        shapes = [b["text"] for b in boxes(loop, page, "#runs tr.shape")]
        assert shapes == ["concurrency sweep: mix-sweep (servetune bench)", "single runs"], shapes
        charts = boxes(loop, page, "svg")
        titles = {c["label"] for c in charts}
        for title in ("TTFT distribution", "TPOT distribution", "ITL distribution", "E2EL distribution",
                      "p99 TTFT (ms) vs throughput", "Throughput over time", "In flight", "TTFT of each request"):  # fmt: skip
            assert title in titles, title
        assert all(c["width"] > 300 and c["right"] <= 1280 and c["height"] > 150 for c in charts)
        per_run = [c for c in charts if c["label"] == "Throughput over time"]
        assert len(per_run) == 6 and len({round(c["top"]) for c in per_run}) == 6, "one row of time series per run"
        levels = [b["text"] for b in boxes(loop, page, "text.point-label")]
        assert {"c1", "c2", "c4"} <= set(levels), "the sweep's points carry their concurrency"
        assert any(b["text"] == "warm-up" and b["width"] > 0 for b in boxes(loop, page, "svg text"))
        classes = boxes(loop, page, "table.classes td.name")
        assert {"chat", "rag"} <= {c["text"] for c in classes}
