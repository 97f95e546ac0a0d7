"""Readiness = the suite's acceptance probe (`servetune.suite.check.check_server`, what `servetune check` runs).

An engine is put behind the proxy only after `/v1/models` lists its model, a short chat answers, and a prompt
of half its max_model_len completes: a server that answers `/health` but cannot generate never takes traffic.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict

from servetune.control.client import ControlClient, ControlError
from servetune.engines.launch import RunningEngine
from servetune.process.interrupts import run_coroutine
from servetune.suite.check import check_server, passed

TOKENIZE_SAMPLE = "The quick brown fox jumps over the lazy dog while the scheduler decides how many tokens fit. " * 8


class Acceptance(BaseModel):
    """The probe's verdict, its time, and each step's words."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    seconds: float
    detail: str


def long_context_tokens(engine: RunningEngine, asked: int | None) -> int | None:
    """The long-context step's prompt length: as asked (0 = skip), else half the served max_model_len."""
    if asked is not None:
        return asked or None
    max_len = engine.facts.max_model_len
    return max(16, max_len // 2) if max_len else None


def accept(engine: RunningEngine, *, long_tokens: int | None, api_key: str | None, timeout_s: float) -> Acceptance:
    """Runs the acceptance probe against a freshly started engine."""
    t0 = time.monotonic()
    result = run_coroutine(
        check_server(
            engine.base_url,
            engine.model_name,
            long_context_tokens=long_context_tokens(engine, long_tokens),
            api_key=api_key,
            timeout_s=timeout_s,
            max_model_len=engine.facts.max_model_len,
        )
    )
    detail = "; ".join(result.notes) or (result.error or "")
    return Acceptance(ok=passed(result), seconds=round(time.monotonic() - t0, 4), detail=detail)


def bytes_per_token(engine: RunningEngine, api_key: str | None) -> float | None:
    """Request-body bytes per prompt token of the served tokenizer, measured on English text (None when the
    server cannot count); the long-prompt threshold in bytes is derived from it."""
    try:
        n = run_coroutine(ControlClient(engine.base_url, api_key=api_key).tokenize(TOKENIZE_SAMPLE, engine.model_name))
    except ControlError:
        return None
    return len(TOKENIZE_SAMPLE.encode()) / n if n else None
