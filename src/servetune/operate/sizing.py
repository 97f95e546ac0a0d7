"""Every number servetune derives for operating a config, with where it came from.

A `Sized` value carries its source in words ("measured: tuning folder X, variant Y, long_generation e2el 308 ms
x 4 headroom"), and every generated file writes that source as a comment beside the number, so nobody has to
guess why `proxy_read_timeout` is 345 s.  The rules that turn measurements into settings live here, once.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from servetune.operate.evidence import Evidence, Sized

READ_TIMEOUT_HEADROOM = 4.0
"""proxy_read_timeout = this x the longest measured request: a loaded server queues and decodes slower than the
idle one that was measured (TPOT under load in the tuning folders is 1.5-3x the single-stream one)."""
READ_TIMEOUT_FLOOR_S = 60
"""Never below nginx's own default: queueing behind a burst alone can take that long."""
BYTES_PER_TOKEN_CEIL = 24
"""A request body's worst case per prompt token: a token is at most ~4 characters of text, and JSON may escape
each as `\\uXXXX` (6 bytes)."""
BODY_OVERHEAD_BYTES = 1 << 20
"""JSON keys, sampling parameters, chat roles: well under 1 MiB."""
COLD_START_HEADROOM = 2.0
"""Startup budgets (Kubernetes startupProbe, compose start_period, serve's startup timeout) = this x the longest
measured cold start: a node with a cold page cache or a slower disk reads the weights slower."""
PROBE_PERIOD_S = 10
LIVENESS_DEADLINE_FLOOR_S = 5.0
LIVENESS_TTFT_HEADROOM = 10.0
"""Liveness deadline = this x the measured p99 TTFT of a short prompt under the tuned load (floor above): a
loaded but healthy engine answers a 1-token probe well within it, a frozen one never does."""


def read_timeout(longest_request_s: Sized) -> Sized:
    """nginx's proxy_read_timeout from the longest measured (or estimated) request."""
    value = max(READ_TIMEOUT_FLOOR_S, math.ceil(longest_request_s.value * READ_TIMEOUT_HEADROOM))
    return Sized(
        value=value,
        source=f"{READ_TIMEOUT_HEADROOM:g} x the longest request, {longest_request_s.value:.3g} s "
        f"({longest_request_s.source}); at least {READ_TIMEOUT_FLOOR_S} s",
    )


def body_bytes(max_model_len: Sized) -> Sized:
    """client_max_body_size: a prompt of max_model_len tokens in the worst JSON encoding, plus overhead."""
    value = max_model_len.int * BYTES_PER_TOKEN_CEIL + BODY_OVERHEAD_BYTES
    return Sized(
        value=value,
        source=f"max_model_len {max_model_len.int:,} ({max_model_len.source}) x {BYTES_PER_TOKEN_CEIL} bytes per "
        f"token (JSON-escaped worst case) + 1 MiB",
    )


def startup_budget(cold_start_s: Sized) -> Sized:
    """Seconds a starting engine is given before it is declared failed."""
    value = max(30.0, math.ceil(cold_start_s.value * COLD_START_HEADROOM))
    return Sized(
        value=value,
        source=f"{COLD_START_HEADROOM:g} x the longest cold start, {cold_start_s.value:.3g} s ({cold_start_s.source})"
        ", at least 30 s",
    )


def liveness_deadline(p99_ttft_s: Sized | None) -> Sized:
    """Deadline of the one-token liveness generation."""
    if p99_ttft_s is None:
        return Sized(value=LIVENESS_DEADLINE_FLOOR_S * 2, source="no TTFT measured: servetune's default")
    value = max(LIVENESS_DEADLINE_FLOOR_S, round(p99_ttft_s.value * LIVENESS_TTFT_HEADROOM, 1))
    return Sized(
        value=value,
        source=f"{LIVENESS_TTFT_HEADROOM:g} x p99 TTFT {p99_ttft_s.value * 1000:.3g} ms ({p99_ttft_s.source}), "
        f"at least {LIVENESS_DEADLINE_FLOOR_S:g} s",
    )


def long_prompt_bytes(tokens: int, bytes_per_token: Sized) -> Sized:
    """The Content-Length above which a request goes to the dedicated long-prompt upstream."""
    value = math.ceil(tokens * bytes_per_token.value)
    return Sized(
        value=value,
        source=f"{tokens:,} prompt tokens x {bytes_per_token.value:.3g} bytes per token ({bytes_per_token.source})",
    )


class ServeSizing(BaseModel):
    """The numbers `servetune serve` and `servetune deploy` take from a source's measurements (None: unknown,
    the running engine or a default decides, and says so)."""

    model_config = ConfigDict(frozen=True)

    startup_timeout_s: Sized | None = None
    liveness_deadline_s: Sized | None = None
    read_timeout: Sized | None = None
    body_bytes: Sized | None = None


def serve_sizing(evidence: Evidence) -> ServeSizing:
    """Every setting a source's measurements determine."""
    cold = evidence.cold_start()
    return ServeSizing(
        startup_timeout_s=startup_budget(cold) if cold else None,
        liveness_deadline_s=liveness_deadline(evidence.p99_ttft) if evidence.p99_ttft else None,
        read_timeout=read_timeout(evidence.longest_request) if evidence.longest_request else None,
        body_bytes=body_bytes(evidence.max_model_len) if evidence.max_model_len else None,
    )
