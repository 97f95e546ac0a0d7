"""Fixtures of the operate tests: `servetune serve` as a real subprocess, and its event log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servetune.operate.events import read_events
from servetune.process.proctable import group_members, living

REPO = Path(__file__).resolve().parents[2]


class Serve:
    """A running `servetune serve` (its own session) and helpers to read what it did."""

    def __init__(self, run_dir: Path, args: list[str]) -> None:
        self.run_dir = run_dir
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        env.setdefault("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))
        self.log = open(run_dir.parent / f"{run_dir.name}.out", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "servetune", "serve", "--run-dir", str(run_dir), *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=REPO,
        )

    @property
    def events(self) -> list[dict[str, Any]]:
        path = self.run_dir / "events.jsonl"
        return read_events(path) if path.exists() else []

    def wait_event(self, pred, timeout_s: float = 60, after: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for e in self.events[after:]:
                if pred(e):
                    return e
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}: {self.output()}")
            time.sleep(0.02)
        raise AssertionError(f"no such event in {timeout_s} s; events: {json.dumps(self.events)[-3000:]}")

    def wait_ready(self, role: str = "main", timeout_s: float = 120, after: int = 0) -> dict[str, Any]:
        return self.wait_event(
            lambda e: e["event"] == "state" and e["state"] == "ready" and e["role"] == role, timeout_s, after
        )

    @property
    def state(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "serve.json").read_text())

    @property
    def url(self) -> str:
        return self.state["proxy_url"]

    def output(self) -> str:
        self.log.flush()
        return (self.run_dir.parent / f"{self.run_dir.name}.out").read_text(errors="replace")[-3000:]

    def leftovers(self) -> list[int]:
        """Living processes of serve's session, nginx's group and every engine group it ever started."""
        groups = {self.proc.pid}
        for e in self.events:
            if isinstance(e.get("nginx_pid"), int):  # serving, nginx_restarted
                groups.add(e["nginx_pid"])
            if isinstance(e.get("pid"), int) and e["event"] in ("state", "died", "hung", "nginx_died"):
                groups.add(e["pid"])
        return sorted({m.pid for g in groups for m in living(group_members(g))})

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    """`serve(*args)` starts a `servetune serve`; every one is stopped (SIGTERM) and proven gone at the end."""
    started: list[Serve] = []

    def start(*args: str, name: str = "run") -> Serve:
        s = Serve(tmp_path / name, list(args))
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
        assert not s.leftovers(), f"processes left: {s.leftovers()}"


def engine_pid(event: dict[str, Any]) -> int:
    return int(event["pid"])
