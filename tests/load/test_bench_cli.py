"""`servetune bench` as a user runs it: the URL `launch` prints, the exit code of a run whose requests failed, and
the input length it sends to a server whose `/tokenize` speaks another dialect, and files `calibrate` reads. Each run takes
`--accept-warnings`: a busy machine's validity warning (its own exit 1) is not what these tests are about."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servetune", "bench", "--no-progress", "--accept-warnings", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@contextmanager
def mock_server(*faults: str, ttft_ms: int = 2, itl_ms: int = 1) -> Iterator[str]:
    """`servetune mock-server` on a free port in its own process group; yields its URL."""
    args = [
        sys.executable,
        "-m",
        "servetune",
        "mock-server",
        "--port",
        "0",
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
    ]
    for fault in faults:
        args += ["--fault", fault]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        yield proc.stderr.readline().split()[4]  # "mock server ready on http://127.0.0.1:PORT ..."
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_bench_takes_the_url_launch_prints() -> None:
    """`launch` prints `http://host:port/v1`: pasted into bench, every request reaches the server."""
    with mock_server() as url:
        ok = bench("--url", url + "/v1", "--model", "mock", "--concurrency", "2", "--requests", "8")
    assert ok.returncode == 0 and "completed 8" in ok.stdout, ok.stdout + ok.stderr


def test_a_run_with_failed_requests_exits_1() -> None:
    """Failed requests fail the run, though its validity warnings are accepted."""
    with mock_server("status:status=500:every=2") as url:
        bad = bench("--url", url, "--model", "mock", "--concurrency", "2", "--requests", "8")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "4 of 8 requests failed" in bad.stderr, bad.stdout + bad.stderr


@pytest.mark.engine
def test_bench_against_llamacpp_sends_the_requested_input_length(llama_server, tmp_path: Path) -> None:
    """llama.cpp answers vLLM's `/tokenize` body with HTTP 200 and `{"tokens": []}`; taken for zero tokens, the
    prompts would be about 4x the requested input (20,443 tokens for 5,120)."""
    out = bench(
        "--url", llama_server.base_url, "--model", llama_server.model_name, "--concurrency", "1", "--requests", "5",
        "--input-tokens", "1024", "--output-tokens", "4", "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]
    assert abs(summary["input_tokens"] - 5 * 1024) <= 5 * 8, summary["input_tokens"]


def test_calibrate_reads_what_bench_writes(tmp_path: Path) -> None:
    """The files `bench --json --jsonl` writes (no top-level `concurrency`: it is in `shape`) are what `servetune
    calibrate` reads. The mock answers at speeds an H200 could have (400 ms to the first token, a 20 ms step)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    with mock_server(ttft_ms=400, itl_ms=20) as url:
        out = bench(
            "--url", url, "--model", "mock", "--concurrency", "2", "--requests", "8", "--input-tokens", "512",
            "--output-tokens", "16", "--json", str(runs / "c2.summary.json"), "--jsonl", str(runs / "c2.jsonl"),
        )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    profile = tmp_path / "p.json"
    fit = subprocess.run(
        [sys.executable, "-m", "servetune", "calibrate", str(runs), "--model", "qwen3.6-27b", "--gpu", "H200",
         "--out", str(profile), "--iters", "4"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fit.returncode == 0, fit.stdout + fit.stderr
    assert json.loads(profile.read_text())["gpu"] == "H200"
