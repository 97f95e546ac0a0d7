"""Liveness: a real one-token generation with a deadline, every period, in a thread of its own.

`/health` of a frozen engine (SIGSTOP, a deadlocked scheduler, a wedged GPU) may still be accepted by the kernel;
only generating a token proves the engine works.  After `failures` consecutive misses the thread reports the
engine hung (once) and ends; the supervisor restarts it.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict


class ProbeOutcome(BaseModel):
    """One liveness probe: passed or not, how long it took, what happened."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    seconds: float
    detail: str


def generate_one_token(base_url: str, model: str, deadline_s: float, api_key: str | None = None) -> ProbeOutcome:
    """POST /v1/completions with max_tokens 1; fails when no answer with a choice comes within the deadline."""
    url = urlsplit(base_url)
    body = json.dumps({"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0, "stream": False})
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=deadline_s)
    try:
        conn.request("POST", "/v1/completions", body=body, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
        elapsed = time.monotonic() - t0
        if resp.status != 200:
            return ProbeOutcome(ok=False, seconds=elapsed, detail=f"HTTP {resp.status}: {payload[:200]!r}")
        if not json.loads(payload).get("choices"):
            return ProbeOutcome(ok=False, seconds=elapsed, detail=f"no choices: {payload[:200]!r}")
        if elapsed > deadline_s:
            return ProbeOutcome(ok=False, seconds=elapsed, detail=f"answered after the {deadline_s:g} s deadline")
        return ProbeOutcome(ok=True, seconds=elapsed, detail="1 token")
    except (OSError, http.client.HTTPException, ValueError) as err:
        kind = "no answer within the deadline" if isinstance(err, TimeoutError) else type(err).__name__
        return ProbeOutcome(ok=False, seconds=time.monotonic() - t0, detail=f"{kind}: {err}")
    finally:
        conn.close()


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
