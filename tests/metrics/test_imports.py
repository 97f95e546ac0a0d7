"""Other tools' result files read as servetune runs: figures mapped onto vLLM's names with the tools' definitions
translated (GuideLLM's and AIPerf's "ITL" is vLLM's TPOT; AIPerf's inter-chunk latency is vLLM's ITL), records
rebuilt from per-request timings, secrets left behind, and `servetune import` + `servetune report` comparing them.

The samples in data/ are written by hand from the tools' own output schemas (GuideLLM's GenerativeBenchmarksReport,
AIPerf's profile_export files, vLLM's result_json); data/vllm_bench_serve_detailed.json is a real
`vllm bench serve --save-result --save-detailed` run (benchmarks/vllm_compat/run.py --sample), and data/real/
holds files the tools wrote themselves, unedited (GuideLLM 0.8.1, AIPerf 0.13.0, vLLM: data/real/README.md)."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servetune.metrics.imports import find_runs, read_runs
from servetune.metrics.runs import read_run, write_run

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def test_guidellm_benchmark_report() -> None:
    (run,) = read_runs(DATA / "guidellm_benchmarks.json")
    assert (run.source.tool, run.source.kind, run.source.level, run.source.model) == (
        "guidellm", "concurrency", 2.0, "servetune-tiny",
    )  # fmt: skip
    assert run.figures["median_tpot_ms"] == 20.0  # GuideLLM's inter_token_latency_ms is vLLM's TPOT
    assert run.figures["p99_e2el_ms"] == pytest.approx(249.0)  # request_latency is in seconds
    assert "median_itl_ms" not in run.figures and run.figures["request_throughput"] == 2.0
    assert run.summary is not None and (run.summary.completed, run.summary.failed) == (4, 1)
    assert run.summary.ttft_ms.p50 == pytest.approx(100.0, abs=0.01)
    assert run.summary.tpot_ms.p50 == pytest.approx(20.0, abs=0.1)  # (end − first)/(n − 1) from the timings
    assert "ITL approximated" in run.source.notes[0]


def test_aiperf_export_folder_with_records() -> None:
    (run,) = read_runs(DATA / "aiperf-c2")
    assert (run.source.tool, run.source.kind, run.source.level) == ("aiperf", "concurrency", 2.0)
    assert run.figures["median_tpot_ms"] == 10.857 and run.figures["p99_itl_ms"] == 12.0
    assert run.figures["completed"] == 4 and run.figures["failed"] == 1
    assert run.summary is not None and (run.summary.completed, run.summary.failed) == (4, 1)
    assert run.summary.errors_by_class == {"http_5xx": 1}
    assert run.summary.ttft_ms.p50 == pytest.approx(50.0) and run.summary.itl_ms.max == pytest.approx(12.0)
    first = run.records[0]
    assert len(first.chunk_ns) == 8 and first.chunk_ns[0] - first.sent_ns == 50_000_000  # exact, from the ICLs
    assert "CANARY" not in str(run.settings)
    assert read_runs(DATA / "aiperf-c2" / "profile_export.jsonl")[0].summary == run.summary


def test_vllm_aggregates_only() -> None:
    (run,) = read_runs(DATA / "vllm_bench_serve_rate8.json")
    assert (run.source.tool, run.source.kind, run.source.level, run.source.label) == ("vllm", "rate", 8.0, "Qwen3-32B")
    assert run.summary is None and run.figure("p99_ttft_ms") == 231.7 and run.figure("failed") == 2
    assert "--save-detailed" in run.source.notes[0]


def test_real_vllm_detailed_file_is_rebuilt_exactly() -> None:
    path = DATA / "vllm_bench_serve_detailed.json"
    (run,) = read_runs(path)
    assert run.summary is not None and run.source.kind == "concurrency"
    for key in ("median_ttft_ms", "mean_tpot_ms", "p99_itl_ms", "mean_e2el_ms", "output_throughput"):
        assert run.figure(key) == pytest.approx(run.figures[key], rel=0.02), key  # servetune's = vLLM's


def test_real_guidellm_sweep_is_one_series_per_strategy() -> None:
    """GuideLLM 0.8's sweep writes its profile in each benchmark's config and runs synchronous, throughput, then
    constant rates: each strategy is its own series, so only the constant rates form a curve."""
    runs = read_runs(DATA / "real" / "guidellm-0.8.1-sweep.json")
    found = [(r.source.label, r.source.kind, r.source.level_text, r.source.model) for r in runs]
    assert found == [
        ("guidellm sweep (synchronous)", "concurrency", "c1", "mock"),
        ("guidellm sweep (throughput)", "concurrency", "c512", "mock"),
        ("guidellm sweep (constant)", "rate", "44.6 req/s", "mock"),
        ("guidellm sweep (constant)", "rate", "69.2 req/s", "mock"),
    ]
    assert all(r.summary is not None and r.summary.completed == 10 for r in runs)


def test_real_aiperf_runs_carry_their_load_and_model() -> None:
    """AIPerf 0.13 writes the load as its profiling phase and the model under `models.items`: a concurrency sweep's
    levels and separate rate runs of one model are two series of "aiperf mock", not one series per folder."""
    runs = find_runs(DATA / "real" / "aiperf")
    found = sorted((r.source.label, r.source.kind, r.source.level, r.source.model) for r in runs)
    assert found == [
        ("aiperf mock", "concurrency", 1.0, "mock"),
        ("aiperf mock", "concurrency", 2.0, "mock"),
        ("aiperf mock", "concurrency", 4.0, "mock"),
        ("aiperf mock", "rate", 10.0, "mock"),
        ("aiperf mock", "rate", 40.0, "mock"),
    ]
    assert all(r.summary is not None and len(r.records) in (10, 12) for r in runs)
    (old,) = read_runs(DATA / "aiperf-c2")
    assert old.source.label == "aiperf servetune-tiny", "the earlier `loadgen` / `endpoint.model_names` still read"


def test_run_files_round_trip(tmp_path: Path) -> None:
    (run,) = read_runs(DATA / "aiperf-c2")
    back = read_run(write_run(tmp_path, "x", run))
    assert back.summary == run.summary and len(back.records) == len(run.records) and back.source == run.source


def test_import_then_report_compares_the_tools(tmp_path: Path) -> None:
    into = tmp_path / "bench"
    files = [DATA / "guidellm_benchmarks.json", DATA / "aiperf-c2", DATA / "vllm_bench_serve_rate8.json"]
    proc = subprocess.run(
        [sys.executable, "-m", "servetune", "import", *map(str, files), "--into", str(into)],
        capture_output=True, text=True, env=ENV, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(find_runs(into)) == 3
    shutil.copy(DATA / "vllm_bench_serve_detailed.json", into)  # a foreign file dropped in the folder counts too
    proc = subprocess.run(
        [sys.executable, "-m", "servetune", "report", str(into)], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    html = (into / "report.html").read_text()
    for name in ("GuideLLM", "AIPerf", "vllm bench serve", "ITL approximated", "as reported"):
        assert name in html, name
    assert "CANARY" not in html and all("CANARY" not in p.read_text() for p in into.iterdir())
    rows = list(csv.DictReader((into / "runs.csv").open()))
    assert sorted(r["tool"] for r in rows) == ["aiperf", "guidellm", "vllm", "vllm"]


def test_foreign_and_broken_files_are_clear_errors(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text('{"hello": 1}')
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x89PNG\x00\xff")
    for path in (odd, binary):
        proc = subprocess.run(
            [sys.executable, "-m", "servetune", "report", str(path)], capture_output=True, text=True, env=ENV,
            timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _import(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servetune", "import", *map(str, args)], capture_output=True, text=True, env=ENV,
        timeout=120,
    )  # fmt: skip


def test_importing_the_same_result_twice_says_so_and_adds_nothing(tmp_path: Path) -> None:
    """A second import of a file (or of a renamed copy) used to add a silent `-2` duplicate, counted twice."""
    into = tmp_path / "bench"
    files = [DATA / "guidellm_benchmarks.json", DATA / "aiperf-c2", DATA / "vllm_bench_serve_rate8.json"]
    assert _import(*files, "--into", into).returncode == 0
    before = sorted(p.name for p in into.iterdir())
    renamed = tmp_path / "copy.json"
    shutil.copy(DATA / "vllm_bench_serve_rate8.json", renamed)
    again = _import(*files, renamed, "--into", into)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already imported:") == 4 and "--force imports it again" in again.stdout
    assert "0 run(s) added" in again.stdout and "4 already there" in again.stdout
    assert sorted(p.name for p in into.iterdir()) == before
    assert len(find_runs(into)) == 3
    forced = _import(renamed, "--into", into, "--force")
    assert forced.returncode == 0 and "1 run(s) added" in forced.stdout
    assert len(find_runs(into)) == 4


def _servetune(capsys: pytest.CaptureFixture[str], *words: object) -> tuple[int, str]:
    """`servetune WORDS` in this process: (exit code, what it said)."""
    from servetune.cli.entry import main

    with pytest.raises(SystemExit) as done:
        main([str(w) for w in words])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out + err


def _vllm_with(tmp_path: Path, key: str, value: object) -> Path:
    data = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    data[key] = value
    path = tmp_path / f"vllm-{key}.json"
    path.write_text(json.dumps(data))  # NaN and inf as Python's json writes them (NaN, Infinity)
    return path


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("request_rate", "abc", "'abc'"),  # was "servetune failed unexpectedly: ValueError"
        ("mean_ttft_ms", "12 ms", "'12 ms'"),  # text where a figure is: was dropped silently
        ("completed", "12", "'12'"),
        ("request_throughput", math.nan, "nan"),  # was imported as "nan req/s"
        ("output_throughput", math.inf, "inf"),
        ("p99_e2el_ms", 1e308, "1e+308"),
        ("ttfts", [0.1] * 11 + ["x"], "'x'"),
        ("latencies", [0.2] * 5, "latencies 5"),  # 12 requests in every other list
    ],
)
def test_a_vllm_result_with_a_bad_number_is_refused_naming_file_key_value_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: object, shown: str
) -> None:
    path = _vllm_with(tmp_path, key, value)
    into = tmp_path / "bench"
    code, said = _servetune(capsys, "import", DATA / "guidellm_benchmarks.json", path, "--into", into)
    assert code == 2 and "failed unexpectedly" not in said, said
    assert f"error: {path}" in said and key in said and shown in said and "fix:" in said, said
    assert not into.exists(), "a file was written before the bad one was refused"


def _edited(source: Path, dest: Path, edit: Callable[[Any], None]) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    dest.write_text(json.dumps(data))
    return dest


def _ttft_mean(value: object) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        data["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["mean"] = value

    return edit


def _end_before_start(data: Any) -> None:
    timings = data["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]
    timings["request_end"] = timings["request_start"] - 1


def _streams(data: Any) -> None:
    data["benchmarks"][0]["config"]["strategy"]["streams"] = "two"


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (_ttft_mean("fast"), "benchmarks.0.metrics.time_to_first_token_ms.successful.mean"),
        (_ttft_mean(math.nan), "benchmarks.0.metrics.time_to_first_token_ms.successful.mean"),
        (_end_before_start, "benchmarks.0.requests.successful.0.info.timings"),
        (_streams, "benchmarks.0.config.strategy.streams"),
    ],
)
def test_a_guidellm_report_with_a_bad_number_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[Any], None], key: str
) -> None:
    path = _edited(DATA / "guidellm_benchmarks.json", tmp_path / "benchmarks.json", edit)
    code, said = _servetune(capsys, "import", path, "--into", tmp_path / "bench")
    assert code == 2 and f"error: {path}: {key}" in said and "fix:" in said, said


@pytest.mark.parametrize(
    ("file", "edit", "key"),
    [
        ("profile_export_aiperf.json", lambda d: d["time_to_first_token"].update(avg=math.inf), "time_to_first_token"),
        ("profile_export_aiperf.json", lambda d: d["request_throughput"].update(avg="2.35"), "request_throughput"),
        ("profile_export_aiperf.json", lambda d: d["time_to_first_token"].update(unit="s"), "time_to_first_token"),
        ("profile_export_aiperf.json", lambda d: d["input_config"]["loadgen"].update(concurrency=-2), "concurrency"),
    ],
)
def test_an_aiperf_summary_with_a_bad_number_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, edit: Callable[[Any], None], key: str
) -> None:
    folder = tmp_path / "aiperf"
    shutil.copytree(DATA / "aiperf-c2", folder)
    _edited(folder / file, folder / file, edit)
    code, said = _servetune(capsys, "import", folder, "--into", tmp_path / "bench")
    assert code == 2 and f"error: {folder / file}" in said and key in said and "fix:" in said, said


def test_an_aiperf_record_with_a_bad_number_is_refused_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "aiperf"
    shutil.copytree(DATA / "aiperf-c2", folder)
    lines = (folder / "profile_export.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["metadata"]["request_start_ns"] = "soon"
    lines[1] = json.dumps(row)
    (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    code, said = _servetune(capsys, "import", folder, "--into", tmp_path / "bench")
    assert code == 2 and "profile_export.jsonl line 2: metadata.request_start_ns" in said and "'soon'" in said, said


def test_the_shipped_samples_still_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [DATA / "guidellm_benchmarks.json", DATA / "aiperf-c2", DATA / "vllm_bench_serve_rate8.json"]
    code, said = _servetune(capsys, "import", *files, DATA / "vllm_bench_serve_detailed.json", "--into", tmp_path)
    assert code == 0 and "4 run(s) added" in said, said


def test_a_servetune_run_file_with_a_nan_figure_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run,) = read_runs(DATA / "vllm_bench_serve_rate8.json")
    path = write_run(tmp_path, "x", run)
    _edited(path, path, lambda d: d["figures"].update(request_throughput=math.nan))
    code, said = _servetune(capsys, "import", path, "--into", tmp_path / "bench")
    assert code == 2 and f"error: {path}: figures: request_throughput" in said and "nan" in said, said
