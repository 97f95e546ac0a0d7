"""Issue 9's list of defects a new user hit in 0.1, one test each, through the command line (so that each test also
runs against 0.1 itself: `PYTHONPATH=<0.1 checkout>/src pytest tests/test_issue9_defects.py` fails them all).

Tests that need a real engine are marked `engine` (llama.cpp's server starts in about a second)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servetune", *args], capture_output=True, text=True, timeout=timeout, **kw
    )


def mock(*faults: str) -> tuple[subprocess.Popen[str], str]:
    """`servetune mock-server` on a free port, as its own process."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "servetune", "mock-server", "--port", str(port), "--ttft-ms", "2", "--itl-ms", "1"]
    for fault in faults:
        args += ["--fault", fault]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "ready" in line:
            return proc, f"http://127.0.0.1:{port}"
    raise AssertionError("the mock server did not start")


def stop(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


# --- one vocabulary -------------------------------------------------------------------------------------------
FLAGS = ("--max-model-len", "128K", "--language-model-only")
LOAD = ("--concurrency", "1", "--num-requests", "2", "--input-len", "16", "--output-len", "4")


def _plan_kv(gpu: str, *flags: str) -> int:
    out = run("plan", "--model", "qwen3.6-27b", "--gpu", gpu, *FLAGS, *flags, "--json")
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout)["kv_cache_tokens"])


def _estimate_kv(gpu: str, *flags: str) -> str:
    out = run("estimate", "qwen3.6-27b", "--gpu", gpu, *FLAGS, *flags, *LOAD)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_estimate_takes_tp_like_plan() -> None:
    """0.1: `estimate --tp 2` ran on one GPU (a quarter of the KV cache) and said nothing, while `plan` took it."""
    two = _plan_kv("A100-80G-SXMx2", "--tp", "2")
    assert two > 2 * _plan_kv("A100-80G-SXM")
    assert f"KV cache {two:,} tokens" in _estimate_kv("A100-80G-SXM", "--tp", "2")


def test_estimate_takes_the_gpu_spelling_plan_takes() -> None:
    """0.1: `estimate --gpu A100-80G-SXMx2` was an unknown GPU while `plan` took it."""
    two = _plan_kv("A100-80G-SXMx2", "-tp", "2")
    assert f"KV cache {two:,} tokens" in _estimate_kv("A100-80G-SXMx2", "-tp", "2")


def test_a_gpu_family_name_is_not_silently_an_80gb_sxm() -> None:
    """0.1: `plan --gpu A100x2` silently became two A100-80G-SXM."""
    out = run("plan", "--model", "qwen3.6-27b", "--gpu", "A100x2", "--max-model-len", "32K")
    assert out.returncode == 2 and "ambiguous" in out.stderr and "A100-40G" in out.stderr, out.stderr


# --- bench -----------------------------------------------------------------------------------------------------
def test_bench_accepts_the_url_launch_prints_and_fails_on_failed_requests(tmp_path: Path) -> None:
    """0.1: `bench --url http://…/v1` (what `launch` prints) failed every request and exited 0; so did a run with
    half of its requests failed."""
    proc, url = mock()
    try:
        ok = run(
            "bench", "--url", url + "/v1", "--model", "mock", "--concurrency", "2", "--requests", "8", "--no-progress"
        )
        assert ok.returncode == 0 and "completed 8" in ok.stdout, ok.stdout + ok.stderr
    finally:
        stop(proc)
    proc, url = mock("status:status=500:every=2")
    try:
        bad = run("bench", "--url", url, "--model", "mock", "--concurrency", "2", "--requests", "8", "--no-progress")
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert "failed" in bad.stdout + bad.stderr
    finally:
        stop(proc)


def test_calibrate_reads_what_bench_writes(tmp_path: Path) -> None:
    """0.1: `calibrate` wanted a top-level `concurrency` that `bench --json/--jsonl` never writes."""
    proc, url = mock()
    point = tmp_path / "runs"
    point.mkdir()
    try:
        out = run(
            "bench",
            "--url",
            url,
            "--model",
            "mock",
            "--concurrency",
            "2",
            "--requests",
            "8",
            "--no-progress",
            "--json",
            str(point / "c2.summary.json"),
            "--jsonl",
            str(point / "c2.jsonl"),
        )
        assert out.returncode == 0, out.stderr
    finally:
        stop(proc)
    fit = run(
        "calibrate",
        str(point),
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "H200",
        "--out",
        str(tmp_path / "p.json"),
        "--iters",
        "4",
        timeout=300,
    )
    assert fit.returncode == 0, fit.stdout + fit.stderr
    assert json.loads((tmp_path / "p.json").read_text())["gpu"] == "H200"


@pytest.mark.engine
def test_bench_against_llamacpp_sends_the_requested_input_length(llama_server, tmp_path: Path) -> None:
    """0.1: without --tokenizer, bench posted vLLM's /tokenize body to llama.cpp, which answers {"tokens": []}
    with HTTP 200, and sent about 4× the requested input (20,443 tokens for 5,120)."""
    out = run(
        "bench",
        "--url",
        llama_server.base_url,
        "--model",
        llama_server.model_name,
        "--concurrency",
        "1",
        "--requests",
        "5",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "4",
        "--no-progress",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]
    assert abs(summary["input_tokens"] - 5 * 1024) <= 5 * 8, summary["input_tokens"]


# --- commands a user pastes -------------------------------------------------------------------------------------
def test_plan_prints_a_docker_command_that_works_as_pasted() -> None:
    """0.1: a named volume for a bundled model name, no note; a serve line for an infeasible config, unmarked."""
    out = run(
        "plan",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "H200",
        "--vllm-version",
        "0.24.0",
        "--max-model-len",
        "32K",
        "--language-model-only",
        "--json",
    )
    plan = json.loads(out.stdout)
    docker = plan["docker_command"]
    assert "vllm/vllm-openai:v0.24.0" in docker and "-v /path/to/qwen3.6-27b:/models/qwen3.6-27b:ro" in docker
    assert any("bundled with servetune" in n for n in plan["command_notes"])
    infeasible = run(
        "plan", "--model", "qwen3.6-27b", "--gpu", "V100-32G", "--max-model-len", "32768", "--language-model-only"
    )
    assert "does NOT fit" in infeasible.stdout, infeasible.stdout[-2000:]


def _experiment(tmp_path: Path, **engine: object) -> Path:
    exp = {
        "name": "defects",
        "engine": {"engine": "vllm", "model": "qwen3.6-27b", **engine},
        "hardware": {"gpu": "H200"},
        "suite": {"repeats": 1, "probes": {"decode_speed": None}},
        "objective": "decode_tok_s",
        "variants": {"matrix": {"baseline": "base", "changes": {"short": {"max-num-seqs": 8}}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


def test_tune_reads_1k_as_vllm_does_and_knows_additional_config(tmp_path: Path) -> None:
    """0.1: tune read `1k` as 1024 where vLLM reads 1000, and rejected `additional-config`, a real vLLM flag."""
    path = _experiment(tmp_path, flags={"max-model-len": "1k", "additional-config": {"gdn_prefill_backend": "triton"}})
    out = run("tune", str(path), "--check", "--json")
    assert out.returncode == 0, out.stderr
    config = json.loads(out.stdout)["stages"][0]["variants"][0]["config"]
    assert config["flags"]["max-model-len"] == 1000
    assert config["flags"]["additional-config"] == {"gdn_prefill_backend": "triton"}


@pytest.mark.engine
def test_report_adds_no_probe_that_never_ran_and_demo_style_rerun(tmp_path: Path) -> None:
    """0.1: `servetune report DIR` re-read the stored experiment with null probes as "run with defaults" and
    listed long_generation, which never ran, in results.json."""
    exp = {
        "name": "report-defect",
        "engine": {"engine": "llamacpp", "model": "tiny", "flags": {"ctx-size": 2048, "threads": 1}},
        "client": {"endpoint": "completions", "tokenizer": "tiny"},
        "suite": {"repeats": 1, "warmup_requests": 0, "probes": {"decode_speed": {"output_tokens": 16}}},
        "objective": "decode_tok_s",
        "variants": {"matrix": {"baseline": "one", "changes": {"two": {"parallel": 2}}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    out = tmp_path / "out"
    env = {**os.environ, "SERVETUNE_CACHE": str(REPO / ".servetune-cache")}
    first = run("tune", str(path), "--out", str(out), env=env, timeout=300)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    again = run("report", str(out), env=env)
    assert again.returncode == 0, again.stderr
    probes = json.loads((out / "results.json").read_text())["experiment"]["suite"]["probes"]
    assert set(probes) == {"decode_speed"}, probes


# --- processes -------------------------------------------------------------------------------------------------
@pytest.mark.engine
def test_launch_stops_cleanly_on_sigint_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """0.1: a Ctrl-C between "ready" and the stop skipped the stop and its report; under `nohup`/`cmd &` (SIGINT
    ignored at start) SIGINT did nothing at all, and the test leaked its `launch` and engine."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servetune",
            "launch",
            "--engine",
            "llamacpp",
            "--tiny",
            "--log-dir",
            str(tmp_path),
            "--ctx-size",
            "2048",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "SERVETUNE_CACHE": str(REPO / ".servetune-cache")},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 - what nohup / `cmd &` do
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ready in"):
                break
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert "processes left: none" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
