"""Liveness: a real one-token generation with a deadline, every period, in a thread of its own.

`/health` of a frozen engine (SIGSTOP, a deadlocked scheduler, a wedged GPU) may still be accepted by the kernel;
only generating a token proves the engine works.  After `failures` consecutive misses the thread reports the
engine hung (once) and ends; the supervisor restarts it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from servetune.control.client import ControlClient, ControlError, ControlTimeouts, run_sync


class ProbeOutcome(BaseModel):
    """One liveness probe: passed or not, how long it took, what happened."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    seconds: float
    detail: str


def generate_one_token(base_url: str, model: str, deadline_s: float, api_key: str | None = None) -> ProbeOutcome:
    """A one-token completion through the control-plane client; fails when no answer with a choice comes within
    the deadline."""
    client = ControlClient(
        base_url, api_key=api_key, timeouts=ControlTimeouts(connect_s=deadline_s, total_s=deadline_s)
    )
    t0 = time.monotonic()
    try:
        run_sync(client.generate_one(model))
    except ControlError as err:
        return ProbeOutcome(ok=False, seconds=time.monotonic() - t0, detail=err.problem)
    elapsed = time.monotonic() - t0
    if elapsed > deadline_s:
        return ProbeOutcome(ok=False, seconds=elapsed, detail=f"answered after the {deadline_s:g} s deadline")
    return ProbeOutcome(ok=True, seconds=elapsed, detail="1 token")


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
