"""`vllm bench serve` compatibility: its flags with its meanings, its result JSON, and vLLM's own tooling reading
servetune's files — vLLM's `bench sweep` running `servetune bench` as its benchmark command against a server it
starts itself, then vLLM's sweep and Pareto readers and its timeline builder on what servetune wrote."""

from __future__ import annotations

import json
import math
import os
import shlex
import socket
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servetune.cli.model_options import parse_words
from servetune.errors import ServetuneError
from servetune.load.bench_args import BenchArgs
from servetune.load.options import LoadOptions

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
SERVETUNE = [sys.executable, "-m", "servetune"]

VLLM_LINE = (
    "--backend openai --base-url {url} --endpoint /v1/completions --model org/tiny --served-model-name mock "
    "--dataset-name random --random-input-len 48 --random-output-len 12 --random-range-ratio 0.1 "
    "--random-prefix-len 16 --num-prompts 24 --request-rate 200 --burstiness 0.8 --max-concurrency 4 "
    "--ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 "
    "--goodput ttft:500 tpot:50 --seed 7 --num-warmups 2 --temperature 0 --disable-tqdm --trust-remote-code "
    "--save-result --save-detailed --result-dir {out} --result-filename run.json --metadata tp=1 note=ci"
)
"""A `vllm bench serve` shell line with its common flags (the words a user has in their history)."""
RUN_LINE = VLLM_LINE.replace("--request-rate 200 --burstiness 0.8 ", "")
"""The line the runs use: without an arrival rate, whose send-time lateness a busy shared test machine can push past
the validity bound (vLLM's --max-concurrency alone: every request at t = 0, four in flight)."""


def _load(argv: list[str]) -> LoadOptions:
    """The load options a bench command line gives."""
    return parse_words(BenchArgs, argv).load()


def test_vllm_line_means_what_it_means_in_vllm() -> None:
    args = parse_words(BenchArgs, shlex.split(VLLM_LINE.format(url="http://127.0.0.1:9", out="/tmp/x")))
    load = args.load()
    assert (args.target, args.request_model, args.model_id, args.api) == (
        "http://127.0.0.1:9",
        "mock",
        "org/tiny",
        "completions",
    )
    assert args.save_result and args.save_detailed and args.result_filename == "run.json"
    assert args.metadata_items == {"tp": "1", "note": "ci"} and args.body == {"temperature": 0.0}
    assert not args.progress and any("--trust-remote-code" in n for n in args.notes)
    assert args.percentile_metrics == ("ttft", "tpot", "itl", "e2el")
    # --random-prefix-len is on top of --random-input-len (vLLM), servetune counts the prefix in the input
    assert (load.input_tokens, load.prefix_tokens, load.output_tokens, load.range_ratio) == (64, 16, 12, 0.1)
    (klass,) = load.classes()
    assert klass.input_dist.std == pytest.approx(0.1 * 48 / math.sqrt(3))  # the spread is the random part's
    shape = load.shape()
    assert (shape.kind, shape.rate, shape.max_concurrency, shape.requests) == ("rate", 200, 4, 24)
    assert (shape.arrival, shape.burstiness, shape.warmup_requests, shape.seed) == ("gamma", 0.8, 2, 7)
    assert load.slos() is not None and load.slos().tpot_ms == 50  # type: ignore[union-attr]
    assert load.percentile_values() == (50, 90, 99) and load.output_control == "ignore_eos"


def test_vllm_defaults_and_translations() -> None:
    closed = _load(["--max-concurrency", "8", "--num-prompts", "5"]).shape()
    assert (closed.kind, closed.concurrency) == ("concurrency", 8)  # rate inf + N in flight = a closed loop
    burst = _load(["--num-prompts", "5"]).shape()
    assert (burst.kind, burst.rate) == ("rate", math.inf)  # vLLM's default --request-rate inf
    assert _load(["--dataset-name", "random"]).input_tokens == 1024  # vLLM's default
    share = _load(["--dataset-name", "prefix_repetition", "--prefix-repetition-num-prefixes", "3"])
    assert (share.prefix_tokens, share.input_tokens, share.prefix_groups, share.output_tokens) == (256, 512, 3, 128)
    assert _load(["--random-range-ratio", '{"input": 0.2, "output": 0.2}']).range_ratio == 0.2
    for argv, says in (
        (["--random-range-ratio", '{"input": 0.2, "output": 0.5}'], "one ratio"),
        (["--dataset-name", "sharegpt"], "needs --dataset-path"),
        (["--dataset-name", "hf"], "--dataset-name"),
        (["--duration", "5"], "needs a load"),
    ):
        with pytest.raises(ServetuneError, match=says):
            _load(argv)
    for argv, says in (
        (["--header", "x=1"], "--header is not supported"),
        (["--backend", "tgi"], "--backend"),
        (["--endpoint", "/v1/embeddings"], "unknown endpoint"),
        (["--percentile-metrics", "ttft,goodness"], "goodness"),
        (["--metadata", "novalue"], "KEY=VALUE"),
    ):
        with pytest.raises(ServetuneError, match=says):
            parse_words(BenchArgs, argv)


def test_sharegpt_file_follows_vllms_eos_and_shuffle_rules(tmp_path: Path) -> None:
    data = tmp_path / "sg.json"
    data.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]))
    plain = _load(["--dataset-name", "sharegpt", "--dataset-path", str(data)])
    assert plain.output_control == "none" and plain.workload().source.shuffle  # type: ignore[union-attr]
    asked = _load(["--dataset-name", "sharegpt", "--dataset-path", str(data), "--ignore-eos",
                                   "--sharegpt-output-len", "9", "--disable-shuffle"])  # fmt: skip
    source = asked.workload().source
    assert asked.output_control == "ignore_eos" and source.output_tokens == 9 and not source.shuffle  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    server = subprocess.Popen(
        [*SERVETUNE, "mock-server", "--port", "0", "--ttft-ms", "8", "--itl-ms", "2"],
        stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        yield server.stderr.readline().split()[4]
    finally:
        server.terminate()
        server.wait(10)


def _run_line(url: str, out: Path) -> tuple[dict, dict]:
    """Runs RUN_LINE unchanged; returns the vLLM result file and servetune's own. What the line means is checked
    here whatever the machine's load: no request failed, every answer as long as asked, input tokens as planned,
    the tokens counted from usage. What the machine's load decides is not: a starved client's event loop runs late
    (its time stamps late by as much), a starved mock server stalls, a slow start is counted as warm-up. bench
    rightly calls such a run invalid and exits 1 (docs/bench.md: validity warnings are fatal without
    --accept-warnings); that verdict is about the machine, and the run and its files are complete all the same."""
    line = shlex.split(RUN_LINE.format(url=url, out=out))
    proc = subprocess.run([*SERVETUNE, "bench", *line], capture_output=True, text=True, env=ENV, timeout=120)
    said = proc.stdout + proc.stderr
    problems = [w for w in proc.stderr.splitlines() if w.startswith("bench: ")]
    assert proc.returncode == 0 or (
        proc.returncode == 1 and len(problems) == 1 and "validity warning" in problems[0]
    ), said
    own = json.loads((out / "run.servetune.json").read_text())
    v = own["summary"]["validity"]
    assert v["failed"] == v["short_requests"] == v["reasoning_only_requests"] == v["tokens_disagree"] == 0, said
    assert v["prompt_offset_varies"] == 0 and v["prompt_tokens_expected"] > 0 and set(v["token_sources"]) == {"usage"}
    assert v["client"]["lost"] == [] and v["queue"] is None, said  # a closed loop in one process, none lost
    assert proc.returncode == 0 or v["client_limited"] or v["stalls"] or not v["steady"]["steady"], said
    return json.loads((out / "run.json").read_text()), own


def test_a_vllm_line_runs_unchanged_and_writes_vllms_file(mock_url: str, tmp_path: Path) -> None:
    data, own = _run_line(mock_url, tmp_path)
    # a start-up transient is warm-up too (docs/bench.md, a difference from vLLM): it leaves the measured requests
    measured, transient = own["summary"]["validity"]["measured"], own["summary"]["validity"]["warmup_excluded"] - 2
    assert measured + transient == 24 and data["completed"] == measured and data["failed"] == 0
    assert data["backend"] == "openai" and data["model_id"] == "org/tiny" and data["max_concurrency"] == 4
    assert data["request_rate"] == "inf" and data["tp"] == "1" and data["num_prompts"] == 24
    for key in ("median_ttft_ms", "p99_itl_ms", "p90_tpot_ms", "mean_e2el_ms", "std_ttft_ms", "request_goodput"):
        assert isinstance(data[key], float), key
    assert "p95_ttft_ms" not in data  # only the asked percentiles, as vLLM writes them
    assert len(data["ttfts"]) == len(data["itls"]) == len(data["start_times"]) == measured
    assert all(len(gaps) == n - 1 for gaps, n in zip(data["itls"], data["output_lens"], strict=True))
    assert all(10 <= n <= 14 for n in data["output_lens"])  # 12 ± 10% (--random-range-ratio spreads both)
    assert data["median_ttft_ms"] == pytest.approx(1000 * statistics.median(data["ttfts"]), rel=0.2)
    assert own["source"]["tool"] == "servetune" and len((tmp_path / "run.records.jsonl").read_text().splitlines()) == 26


@pytest.fixture(scope="module")
def vllm_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM's own `bench sweep` machinery: its ServerProcess starts servetune's mock server, its run_comb runs
    `servetune bench` as the benchmark command (appending its own --percentile-metrics/--save-result/
    --result-dir/--result-filename) twice per concurrency, and writes run=N.json and summary.json. The files are
    under test, not the runs: vLLM's sweep stops at a benchmark that exits 1, and one does on a validity warning
    (under a CPU hog: its client's event loop ran late), so the warnings are accepted."""
    serve_mod = pytest.importorskip("vllm.benchmarks.sweep.serve", reason="vLLM is not installed")
    from vllm.benchmarks.sweep.param_sweep import ParameterSweepItem

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path_factory.mktemp("vllm-sweep")
    serve_cmd = [
        *SERVETUNE,
        "mock-server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ttft-ms",
        "5",
        "--itl-ms",
        "1",
    ]
    bench_cmd = [*SERVETUNE, "bench", "--base-url", f"http://127.0.0.1:{port}", "--model", "mock",
                 "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "8",
                 "--num-prompts", "12", "--disable-tqdm", "--accept-warnings"]  # fmt: skip
    # vLLM's sweep stops at a command that exits non-zero; a starved client's validity warning (exit 1) is not
    # what these readers are tested on, and it stays in each run's servetune file
    os.environ["PYTHONPATH"] = ENV["PYTHONPATH"]  # the commands vLLM runs inherit this process's environment
    with serve_mod.run_server(
        serve_cmd, ["true"], show_stdout=False, serve_overrides=ParameterSweepItem(), dry_run=False
    ) as server:
        for concurrency in (1, 3):
            comb = ParameterSweepItem({"max_concurrency": concurrency})
            data = serve_mod.run_comb(
                server, bench_cmd, serve_comb=ParameterSweepItem(), bench_comb=comb, link_vars=[],
                base_path=out / f"BENCH-c{concurrency}", num_runs=2, dry_run=False,
            )  # fmt: skip
            assert data and len(data) == 2
    return out


def test_vllm_sweep_and_plot_readers_take_servetunes_files(vllm_sweep: Path) -> None:
    plot = pytest.importorskip("vllm.benchmarks.sweep.plot")
    pareto = pytest.importorskip("vllm.benchmarks.sweep.plot_pareto")
    pytest.importorskip("vllm.benchmarks.plot")
    rows = [r for path in sorted(vllm_sweep.rglob("summary.json")) for r in plot._json_load_bytes(path)]
    assert len(rows) == 4 and {r["max_concurrency"] for r in rows} == {1, 3}
    rows = plot._convert_inf_nan_strings(rows)
    assert all(plot._get_metric(r, "p99_e2el_ms") > 0 for r in rows)  # vLLM's sweep passes e2el in its line
    prepared, skipped = pareto._prepare_records(rows, user_count_var="max_concurrency", gpu_count_var=None)
    assert skipped == 0 and all(p["tokens_per_user"] > 0 for p in prepared)
    detailed = json.loads(next(vllm_sweep.rglob("run=0.json")).read_text())
    assert "ttfts" not in detailed  # without --save-detailed, as vLLM


def test_vllm_timeline_builder_takes_servetunes_detailed_file(mock_url: str, tmp_path: Path) -> None:
    timeline = pytest.importorskip("vllm.benchmarks.plot", reason="vLLM is not installed")
    data, _ = _run_line(mock_url, tmp_path)
    requests = [
        {"start_time": s, "ttft": t, "itl": i, "latency": t + sum(i), "prompt_len": p, "output_tokens": o}
        for s, t, i, p, o in zip(
            data["start_times"], data["ttfts"], data["itls"], data["input_lens"], data["output_lens"], strict=True
        )
    ]  # what `vllm bench serve --plot-timeline` hands to its builder
    segments = timeline.construct_timeline_data(requests, [0.025, 0.05], ["fast", "mid", "slow"])
    assert len(segments) == sum(data["output_lens"])  # one TTFT segment and one per ITL gap of each request


def test_servetune_report_reads_the_vllm_sweep_folder(vllm_sweep: Path) -> None:
    proc = subprocess.run([*SERVETUNE, "report", str(vllm_sweep)], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    html = (vllm_sweep / "report.html").read_text()
    assert html.count("servetune bench</td>") == 4  # the twins of vLLM's run=N.json are read once, as servetune's
    assert "p99 TTFT (ms) vs throughput" in html and ">c3<" in html  # the sweep's curve, points labelled
