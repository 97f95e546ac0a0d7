"""The event log: one JSON object per line, flushed as it happens, for people and for tests.

Every state change of a supervised engine, every restart (with its cause and the log excerpt that proves it),
every failed probe, fallback and switch is one line with a wall-clock time, so an outage can be reconstructed
afterwards and `jq` can answer "why did it restart at 03:12".  Text passes through the `Redactor` first.
The events a person at the terminal needs (where the proxy listens, ready, a death or hang, a fallback, a
switch, the stop) are also told there, one line each (`terminal_line`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servetune.errors import ServetuneError
from servetune.secrets import Redactor


class EventLog:
    """Appends events to a JSONL file (thread-safe; each line flushed and fsynced: a crash keeps them)."""

    def __init__(self, path: Path, redactor: Redactor | None = None, echo: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self.echo = echo
        """Told the terminal line of each event that has one."""
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the supervisor's life
        except OSError as err:
            raise ServetuneError(
                f"cannot write the event log {path}: {err.strerror}", "pass a writable --run-dir"
            ) from err

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Writes one event and returns it (as written, redacted)."""
        event = self.redactor.data({"t": round(time.time(), 3), "event": kind, **fields})
        line = json.dumps(event, ensure_ascii=False, default=str)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        told = terminal_line(event) if self.echo else None
        if told and self.echo:
            self.echo(told)
        return event

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def terminal_line(event: dict[str, Any]) -> str | None:
    """The line a person at the terminal reads for an event (None: only in the log)."""
    kind, role = event.get("event"), event.get("role")
    if kind == "serving":
        return f"proxy {event.get('proxy_url')} (control {event.get('control_url')}); serving {event.get('origin')}"
    if kind == "state" and event.get("state") == "ready":
        took = f" in {event['startup_s']:.1f} s" if isinstance(event.get("startup_s"), int | float) else ""
        start = event.get("start")
        cache = f" ({_cache(start)})" if isinstance(start, dict) else ""
        return f"{role} ready{took}{cache}: engine pid {event.get('pid')} at {event.get('url')}"
    if kind == "state" and event.get("state") == "backoff":
        return f"{role} restarts in {event.get('delay_s')} s (attempt {event.get('attempt')})"
    if kind == "start_failed":
        return f"{role} failed to start: {event.get('cause')}: {event.get('excerpt')} ({_log(event)})"
    if kind == "died":
        return f"{role} engine pid {event.get('pid')} died: {event.get('cause')} (log {event.get('log')})"
    if kind == "hung":
        return f"{role} engine pid {event.get('pid')} hung: no answer within {event.get('deadline_s')} s; restarting"
    if kind == "nginx_died":
        cause, log = event.get("cause"), event.get("log")
        return f"nginx pid {event.get('pid')} died: {cause}; not ready until it is back (log {log})"
    if kind == "nginx_restart_failed":
        why = str(event.get("reason", "")).partition("\n")[0]
        return f"nginx did not start again (attempt {event.get('attempt')}); retry in {event.get('delay_s')} s: {why}"
    if kind == "nginx_restarted":
        return f"nginx back after {event.get('down_s')} s: pid {event.get('nginx_pid')} at {event.get('proxy_url')}"
    if kind in ("control_restarted", "control_restart_failed"):
        what = "started again" if kind == "control_restarted" else f"could not start again: {event.get('reason')}"
        return f"control server {event.get('url')} {what}"
    if kind == "fallback":
        why = event.get("why") or f"{event.get('failures')} failures in {event.get('window_s')} s"
        return f"{role}: {why}: fallback ({event.get('how')})"
    if kind == "gave_up":
        hint = f" Fix: {event['hint']}" if event.get("hint") else ""
        return f"{event.get('reason')}; servetune serve stops (exit 1) ({_log(event)}).{hint}"
    if kind == "fallback_ready":
        return f"{role} fallback ready; it gives up: {event.get('gives_up')}"
    if kind == "switch_started":
        if event.get("decision") == "drain_and_replace":
            bound = event.get("unavailable_bound_s")
            return f"switch started: {role} drains and stops the old config, then starts the new one (no engine " + (
                f"serves for up to {bound:.0f} s)" if isinstance(bound, int | float) else "serves meanwhile)"
            )
        return f"switch started: {role} starts the new config beside the old one"
    if kind == "switch_done":
        if event.get("decision") == "drain_and_replace":
            return (
                f"switch done in {event.get('total_s')} s: {role} now at {event.get('green_url')}; no engine served "
                f"for {event.get('unavailable_s')} s (at most {event.get('bound_s')} s planned)"
            )
        return f"switch done in {event.get('total_s')} s: {role} now at {event.get('green_url')}"
    if kind == "switch_refused":
        fixes = "; ".join(str(f) for f in event.get("fixes") or [])
        return f"switch refused, nothing changed: {event.get('reason')}" + (f". Fix: {fixes}" if fixes else "")
    if kind == "waiting_for_memory":
        return f"{role} waits for memory before it starts (up to {event.get('up_to_s')} s): {event.get('reason')}"
    if kind == "memory_free":
        return f"{role} has the memory it needs after {event.get('waited_s')} s"
    if kind == "switch_failed":
        return f"switch failed, nothing changed: {event.get('reason')}"
    if kind == "stopping":
        return f"stopping: draining in-flight streams for up to {event.get('drain_s')} s"
    if kind == "stopped":
        return f"stopped after a {event.get('drained_s')} s drain; " + (
            "no process left" if event.get("clean") else "some processes survived (see the stopped event)"
        )
    return None


def _cache(start: dict[str, Any]) -> str:
    """`cold compile cache` / `warm compile cache` / `no compile cache` of a start record."""
    cache = start.get("compile_cache")
    return f"{cache} compile cache" if cache in ("warm", "cold") else "no compile cache"


def _log(event: dict[str, Any]) -> str:
    """Where the proof is: the engine's log, or why there is none (no process was started: a missing model)."""
    return f"log {event['log']}" if event.get("log") else "no log: no engine process was started"


def read_events(path: Path) -> list[dict[str, Any]]:
    """All events of a log (a torn last line, from a kill mid-write, is skipped)."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
