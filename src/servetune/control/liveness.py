"""Does an engine work? A real one-token generation with a deadline, through the control-plane client.

`/health` of a frozen engine (SIGSTOP, a deadlocked scheduler, a wedged GPU) may still be accepted by the kernel;
only generating a token proves the engine works. The tuner's watchdog asks it after a probe's requests failed
(`engines.launch.RunningEngine.responds`), the supervisor's liveness thread every period (`operate.liveness`).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict

from servetune.control.client import ControlClient, ControlError, ControlTimeouts
from servetune.process.interrupts import run_coroutine


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
        run_coroutine(client.generate_one(model))
    except ControlError as err:
        return ProbeOutcome(ok=False, seconds=time.monotonic() - t0, detail=err.problem)
    elapsed = time.monotonic() - t0
    if elapsed > deadline_s:
        return ProbeOutcome(ok=False, seconds=elapsed, detail=f"answered after the {deadline_s:g} s deadline")
    return ProbeOutcome(ok=True, seconds=elapsed, detail="1 token")
