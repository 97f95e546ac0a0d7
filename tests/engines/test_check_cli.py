"""`servetune check` and `servetune launch` from the command line, against real llama.cpp servers."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetune.cli import app
from servetune.engines.check import run_check
from servetune.engines.readiness import probe


def test_check_attached_server_passes(llama_server) -> None:
    result = CliRunner().invoke(
        app, ["check", "--url", llama_server.base_url, "--model", llama_server.model_name, "--long-context", "1000"]
    )
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "long context (1000 tokens)" in result.output


def test_check_fails_for_wrong_model_and_too_long_context(llama_server) -> None:
    report = run_check(llama_server.base_url, "other-model", long_context_tokens=None)
    assert not report.ok and "not served" in report.steps[0].detail
    report = run_check(llama_server.base_url, llama_server.model_name, long_context_tokens=5000)
    assert not report.ok and "exceed max_model_len=2048" in report.steps[-1].detail
    result = CliRunner().invoke(app, ["check", "--url", llama_server.base_url, "--model", "other-model"])
    assert result.exit_code == 1 and "FAIL" in result.output
    result = CliRunner().invoke(app, ["check", "--url", llama_server.base_url, "--model", "other-model", "--json"])
    assert result.exit_code == 1 and '"ok": false' in result.output.replace('"ok":false', '"ok": false')


def test_check_no_server_is_a_clean_failure() -> None:
    report = run_check("http://127.0.0.1:9", "m", long_context_tokens=None)
    assert not report.ok and all(not s.ok for s in report.steps)


@pytest.mark.engine
def test_check_launches_tiny_llamacpp(tiny_model, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "check",
            "--engine",
            "llamacpp",
            "--tiny",
            "--long-context",
            "500",
            "--log-dir",
            str(tmp_path),
            "--ctx-size",
            "2048",
        ],
    )
    assert result.exit_code == 0, result.output
    assert list(tmp_path.glob("llamacpp-*.log"))


@pytest.mark.engine
def test_launch_serves_until_interrupted(tiny_model, tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
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
            "--port",
            "0",
            "--ctx-size",
            "2048",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    url = None
    for line in proc.stdout:
        if line.startswith("ready in"):
            url = line.split(": ", 1)[1].split("/v1")[0]
            break
    assert url, "launch did not report ready"
    assert probe(url, "servetune-tiny").ready_for("servetune-tiny")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert "processes left: none" in out
    deadline = time.monotonic() + 5
    while probe(url).health_status is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert probe(url).health_status is None
