"""The event log: one JSON object per line, flushed as it happens, for people and for tests.

Every state change of a supervised engine, every restart (with its cause and the log excerpt that proves it),
every failed probe, fallback and switch is one line with a wall-clock time, so an outage can be reconstructed
afterwards and `jq` can answer "why did it restart at 03:12".  Text passes through the `Redactor` first.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from servetune.errors import ServetuneError
from servetune.secrets import Redactor


class EventLog:
    """Appends events to a JSONL file (thread-safe; each line flushed and fsynced: a crash keeps them)."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
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
        return event

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    """All events of a log (a torn last line, from a kill mid-write, is skipped)."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
