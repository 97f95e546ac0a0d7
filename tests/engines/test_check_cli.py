"""`servetune check` and `servetune launch` from the command line, against real llama.cpp servers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetune.cli.entry import app
from servetune.control.client import ControlClient
from servetune.engines.readiness import probe
from servetune.process.interrupts import run_coroutine
from servetune.process.ports import free_port


def _probe(url: str):
    return run_coroutine(probe(ControlClient(url)))


def test_check_attached_server_passes(llama_server) -> None:
    result = CliRunner().invoke(
        app, ["check", "--url", llama_server.base_url, "--model", llama_server.model_name, "--long-context", "1000"]
    )
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "long context" in result.output
    as_json = CliRunner().invoke(
        app,
        [
            "check",
            "--url",
            llama_server.base_url,
            "--model",
            llama_server.model_name,
            "--long-context",
            "1000",
            "--json",
        ],
    )
    assert re.search(r"PASS long context: 10[0-9][0-9] prompt tokens", as_json.output), as_json.output


def test_check_fails_for_wrong_model_and_fits_a_too_long_context(llama_server) -> None:
    result = CliRunner().invoke(app, ["check", "--url", llama_server.base_url, "--model", "other-model"])
    assert result.exit_code == 1 and "FAIL" in result.output and "not served" in result.output
    result = CliRunner().invoke(app, ["check", "--url", llama_server.base_url, "--model", "other-model", "--json"])
    assert result.exit_code == 1 and '"passed": 0.0' in result.output
    result = CliRunner().invoke(
        app, ["check", "--url", llama_server.base_url, "--model", llama_server.model_name, "--long-context", "5000"]
    )
    assert "do not fit max_model_len=2048" in result.output, result.output


def test_check_no_server_is_a_clean_failure() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(app, ["check", "--url", url, "--model", "m", "--timeout", "5"])
    assert result.exit_code == 1 and "FAIL" in result.output, result.output
    assert "server" in result.output and f"cannot connect to {url}" in " ".join(result.output.split())


def test_check_of_a_frozen_server_names_it_within_the_timeout() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "servetune", "mock-server", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        url = proc.stderr.readline().split()[4]  # "mock server ready on http://127.0.0.1:PORT ..."
        os.killpg(proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        result = CliRunner().invoke(app, ["check", "--url", url, "--model", "mock", "--timeout", "3"])
        elapsed = time.monotonic() - t0
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert result.exit_code == 1, result.output
    shown = " ".join(result.output.split())
    assert "server │ FAIL" in shown and url in shown and "did not answer within 3 s" in shown, result.output
    assert elapsed <= 3 + 3, f"--timeout 3 bounds the whole check, it took {elapsed:.1f} s"


def test_check_url_as_launch_prints_it(llama_server) -> None:
    # `launch` prints http://host:port/v1: exactly what a user pastes into check and bench.
    result = CliRunner().invoke(
        app, ["check", "--url", llama_server.base_url + "/v1/", "--model", llama_server.model_name]
    )
    assert result.exit_code == 0, result.output


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


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `nohup` and `cmd &` do to a child


@pytest.mark.engine
@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint", "sigint-ignored-at-start"])
def test_launch_serves_until_interrupted(tiny_model, tmp_path: Path, sigint_ignored: bool) -> None:
    """Ctrl-C after "ready" stops the engine with its teardown report, also when `launch` was started with SIGINT
    ignored (under `nohup` or `cmd &`), where it would otherwise do nothing at all."""
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
        preexec_fn=_ignore_sigint if sigint_ignored else None,  # noqa: PLW1509 - no threads in this test
    )
    assert proc.stdout is not None
    url = None
    for line in proc.stdout:
        if line.startswith("ready in"):
            url = line.split(": ", 1)[1].split("/v1")[0]
            break
    try:
        assert url, "launch did not report ready"
        assert _probe(url).ready_for("servetune-tiny")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert "processes left: none" in out, out
        deadline = time.monotonic() + 5
        while _probe(url).health_status is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _probe(url).health_status is None
    finally:  # a failed assertion must not leave `launch` and its engine running
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
