"""Liveness: `control.liveness.generate_one_token` every period, in a thread of its own.

After `failures` consecutive misses the thread reports the engine hung (once) and ends;
the supervisor restarts it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from servetune.control.liveness import ProbeOutcome, generate_one_token


class Liveness(threading.Thread):
    """Probes one engine every `period_s`; calls `on_result` for each probe and `on_hung` once at the end."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        period_s: float,
        deadline_s: float,
        failures: int,
        api_key: str | None,
        on_result: Callable[[ProbeOutcome, int], None],
        on_hung: Callable[[ProbeOutcome, float], None],
    ) -> None:
        super().__init__(name=f"liveness {base_url}", daemon=True)
        self.base_url, self.model = base_url, model
        self.period_s, self.deadline_s, self.failures = period_s, deadline_s, failures
        self.api_key = api_key
        self.on_result, self.on_hung = on_result, on_hung
        self.stopped = threading.Event()

    def run(self) -> None:
        misses = 0
        last_ok = time.monotonic()
        while not self.stopped.wait(self.period_s):
            outcome = generate_one_token(self.base_url, self.model, self.deadline_s, self.api_key)
            if self.stopped.is_set():
                return
            misses = 0 if outcome.ok else misses + 1
            if outcome.ok:
                last_ok = time.monotonic()
            self.on_result(outcome, misses)
            if misses >= self.failures:
                self.on_hung(outcome, time.monotonic() - last_ok)
                return

    def stop(self) -> None:
        self.stopped.set()
