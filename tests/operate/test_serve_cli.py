"""`servetune serve` as its documentation shows it, through the command line: the default (relative) run folder,
a blue-green switch asked for with `serve --switch NEW` from a second command, and what the terminal is told.
The options are generated from `ServeArgs`: a value out of its bounds is refused before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from tests.operate.conftest import REPO, Serve

FLAGS = ["--ctx-size", "4096", "--parallel", "2", "--threads", "1"]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.setdefault("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))
    return env


def _servetune(*args: str, cwd: Path, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servetune", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


class DefaultDirServe(Serve):
    """A `servetune serve` started in `cwd` without --run-dir: its folder is the default, relative `runs/serve`."""

    def __init__(self, cwd: Path, args: list[str]) -> None:
        self.run_dir = cwd / "runs" / "serve"
        self.run_dir.parent.mkdir(parents=True)
        self.log = open(self.run_dir.parent / "serve.out", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "servetune", "serve", *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
            cwd=cwd,
        )


@pytest.mark.engine
def test_the_documented_switch_command_runs_in_the_default_relative_run_dir_and_the_terminal_says_it(
    tmp_path: Path,
) -> None:
    """Three defects: the default `--run-dir runs/serve` (relative) gave nginx a doubled prefix
    (`runs/serve/nginx/runs/serve/nginx/error.log`); `serve --run-dir DIR --switch NEW` answered "nothing to
    serve" (exit 2); and the terminal got one line, the proxy URL and the rest only in events.jsonl."""
    pytest.importorskip("xllamacpp")
    s = DefaultDirServe(tmp_path, ["--engine", "llamacpp", "--model", "tiny", "--", *FLAGS])
    try:
        blue = s.wait_ready()
        assert (s.run_dir / "nginx" / "error.log").is_file()
        green = tmp_path / "green.yaml"
        flags = {"ctx-size": 4096, "parallel": 1, "threads": 1}
        green.write_text(yaml.safe_dump({"engine": "llamacpp", "model": "tiny", "flags": flags}))
        switched = _servetune("serve", "--run-dir", "runs/serve", "--switch", "green.yaml", cwd=tmp_path, timeout_s=300)
        assert switched.returncode == 0, switched.stderr
        assert "switched in" in switched.stderr and "http://127.0.0.1:" in switched.stderr
        status = json.load(urllib.request.urlopen(s.state["control_url"] + "/status", timeout=5))
        assert status["roles"]["main"]["pid"] not in (None, blue["pid"]) and status["roles"]["main"]["state"] == "ready"
        body = json.dumps({"model": "servetune-tiny", "prompt": "hi", "max_tokens": 2}).encode()
        request = urllib.request.Request(
            s.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        assert json.load(urllib.request.urlopen(request, timeout=30))["choices"]
    finally:
        code = s.stop()
    assert code == 0 and not s.leftovers()
    told = (s.run_dir.parent / "serve.out").read_text()
    for said in (
        f"events in {s.run_dir / 'events.jsonl'}",
        "proxy http://127.0.0.1:",
        "main ready in",
        "switch started",
        "switch done in",
        "stopping: draining",
        "no process left",
    ):
        assert said in told, (said, told)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--liveness-deadline", "-1"], "--liveness-deadline: input should be greater than 0 (got '-1')"),
        (["--read-timeout", "0"], "--read-timeout: input should be greater than 0"),
        (["--liveness-period", "nan"], "--liveness-period: input should be a finite number"),
        (["--port", "70000"], "--port: input should be less than or equal to 65535"),
        (["--crash-loop", "0"], "--crash-loop: input should be greater than or equal to 1"),
        (["--drain", "-5"], "--drain: input should be greater than or equal to 0"),
        (["--drain", "1e300"], "--drain: input should be less than or equal to 86400"),
        (["--liveness-period", "1e300"], "--liveness-period: input should be less than or equal to 3600"),
        (["--backoff-max", "1e300"], "--backoff-max: input should be less than or equal to 3600"),
        (["--give-up", "0"], "--give-up: input should be greater than or equal to 1"),
        (["--switch", "new.yaml", "config.yaml"], "--switch asks the serve running in"),
        (["--switch", "new.yaml", "--engine", "llamacpp"], "it takes no --engine"),
        (["--check"], "--check belong(s) to a switch"),
        (["--max-unavailable-s", "60"], "--max-unavailable-s belong(s) to a switch"),
        (["--switch", "new.yaml", "--max-unavailable-s", "-1"], "--max-unavailable-s: input should be greater than"),
        (["--switch", "new.yaml", "--max-unavailable-s", "1e300"], "--max-unavailable-s: input should be less than"),
        (["--memory-limit-gib", "0"], "--memory-limit-gib: input should be greater than 0"),
        (["--memory-limit-gib", "nan"], "--memory-limit-gib: input should be a finite number"),
    ],
)
def test_bad_serve_options_are_refused_before_anything_starts(args: list[str], said: str, tmp_path: Path) -> None:
    done = _servetune("serve", "--model", "tiny", *args, cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "fix:" in done.stderr
    assert not (tmp_path / "runs").exists(), "nothing was started"


def test_a_fallback_that_cannot_fit_on_the_device_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The fallback must fit on what it falls back to: a vLLM CPU fallback (its 1 GiB KV space, its files and vLLM
    itself: 2.5 GiB) within --memory-limit-gib 1 cannot, and serve says so before it starts anything."""
    pytest.importorskip("vllm")
    (tmp_path / "fallback.yaml").write_text(yaml.safe_dump({"engine": "vllm", "model": "tiny"}))
    done = _servetune(
        "serve",
        "--memory-limit-gib",
        "1",
        "--fallback",
        "fallback.yaml",
        "--engine",
        "llamacpp",
        "--model",
        "tiny",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "the fallback profile (given: fallback.yaml) cannot run" in done.stderr and "fix:" in done.stderr
    assert "more than the 1.00 GiB serve may use" in done.stderr
    assert not (tmp_path / "runs").exists(), "nothing was started"


def test_a_switch_with_no_serve_running_names_the_run_dir(tmp_path: Path) -> None:
    (tmp_path / "new.yaml").write_text(yaml.safe_dump({"engine": "llamacpp", "model": "tiny"}))
    done = _servetune("serve", "--run-dir", "elsewhere", "--switch", "new.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"no running `servetune serve` in {tmp_path / 'elsewhere'}" in done.stderr


@pytest.mark.engine
def test_a_second_serve_in_the_same_run_dir_is_refused_naming_the_first(serve, tmp_path: Path) -> None:
    """Two serves shared one --run-dir: the second overwrote serve.json and control.token, and once it stopped the
    first kept serving with no way to --switch it. The run folder is locked before any file is written."""
    pytest.importorskip("xllamacpp")
    first = serve("--engine", "llamacpp", "--model", "tiny", "--", *FLAGS)
    first.wait_ready()
    state = (first.run_dir / "serve.json").read_text()
    token = (first.run_dir / "control.token").read_text()
    events = (first.run_dir / "events.jsonl").read_text()
    second = _servetune(
        "serve", "--run-dir", str(first.run_dir), "--engine", "llamacpp", "--model", "tiny", "--", *FLAGS, cwd=tmp_path
    )
    assert second.returncode == 2, second.stderr
    said = second.stderr
    assert f"the run folder {first.run_dir} is in use by servetune serve pid {first.proc.pid}" in said, said
    assert f"with its proxy at {first.url}" in said and f"kill -TERM {first.proc.pid}" in said and "--switch" in said
    assert "Traceback" not in said and "fix:" in said
    # nothing of the first was touched, and it still answers
    assert (first.run_dir / "serve.json").read_text() == state
    assert (first.run_dir / "control.token").read_text() == token
    assert (first.run_dir / "events.jsonl").read_text() == events
    assert json.load(urllib.request.urlopen(first.state["control_url"] + "/readyz", timeout=5)) == {"ready": True}
    assert first.stop() == 0
    import fcntl

    with open(first.run_dir / "serve.lock") as handle:  # released at the stop
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
