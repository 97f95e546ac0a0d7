"""What the mock server does: its timing and the faults it can inject.

The mock server exists to measure clients (servetune's own and its peers) against a known truth and to
exercise every error path of the client from a real socket. Its behaviour is fully described by these
frozen types so that a test or a benchmark can state exactly what it injected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FaultKind = Literal[
    "error_event",  # after `after` tokens: `data: {"error": {...}}`, then [DONE] (vLLM's way of failing mid-stream)
    "truncate",  # after `after` tokens: close the connection cleanly, with no terminator and no [DONE]
    "reset",  # after `after` tokens: abort the connection with a TCP RST
    "stall",  # after `after` tokens: send nothing for `seconds` (then continue)
    "invalid_utf8",  # token number `after` carries bytes that are not UTF-8
    "early_eos",  # stop after `after` tokens with finish_reason "stop", whatever max_tokens asked
    "drop_usage",  # never send `usage`, even when stream_options.include_usage asks for it
    "status",  # answer with HTTP `status` (429, 500, 503...) and an OpenAI-style error body
    "close_after",  # answer fully, then close the kept-alive connection without saying so (llama.cpp's server)
]

FAULT_KINDS: tuple[str, ...] = FaultKind.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Fault:
    """One misbehaviour. `every`: applied to every n-th request (1 = all), deterministic for tests."""

    kind: FaultKind
    after: int = 0
    seconds: float = 3600.0
    status: int = 500
    every: int = 1

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Parses `kind[:key=value...]`, e.g. `status:status=429:every=10` or `stall:after=5:seconds=2`."""
        from servetune.errors import ServetuneError

        kind, *pairs = text.split(":")
        if kind not in FAULT_KINDS:
            raise ServetuneError(f"unknown mock fault {kind!r}", f"use one of: {', '.join(FAULT_KINDS)}")
        values: dict[str, float | int] = {}
        for pair in pairs:
            key, _, value = pair.partition("=")
            if key not in ("after", "seconds", "status", "every") or not value:
                raise ServetuneError(
                    f"bad mock fault option {pair!r} in {text!r}",
                    "options are after=N, seconds=S, status=CODE, every=N (e.g. status:status=429:every=10)",
                )
            values[key] = float(value) if key == "seconds" else int(value)
        return cls(kind=kind, **values)  # type: ignore[arg-type]

    @classmethod
    def from_body(cls, spec: dict) -> Fault:
        """A per-request fault from the request body's `mock_fault` field (passed as extra body)."""
        return cls(
            kind=spec["kind"],
            after=int(spec.get("after", 0)),
            seconds=float(spec.get("seconds", 3600.0)),
            status=int(spec.get("status", 500)),
        )


@dataclass(frozen=True)
class MockConfig:
    """Timing and behaviour of the mock server.

    ttft_ms: time from the request's arrival to its first token. itl_ms: time between tokens.
    output_tokens: length when the request gives no max_tokens. reasoning_tokens: the first tokens of a chat
    answer are sent as `reasoning_content` (a reasoning model). precise: wake a little early and spin to the
    exact send time, so the truth the server injects is exact to ~10 µs rather than the ~1 ms of the loop's
    timer resolution (costs a little server CPU).

    pause_at_s, pause_s: a server-wide stall, as a real engine makes one while it compiles a kernel for a new batch
    size: `pause_at_s` after the first generation request arrived, every stream stops for `pause_s` — a token due
    in the pause leaves when it ends and each stream's later tokens move by as much, a request that arrives in it
    starts when it ends. settle_requests, settle_ttft_ms: a warm-up transient, as a cold engine (caches, graphs,
    allocators) shows one: the first generation request's TTFT is `settle_ttft_ms`, falling linearly to `ttft_ms`
    over the first `settle_requests` requests (in the order they arrive).
    """

    model: str = "mock"
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    output_tokens: int = 128
    reasoning_tokens: int = 0
    max_model_len: int = 1_000_000
    precise: bool = True
    api_key: str | None = None  # when set, requests without `Authorization: Bearer <key>` get HTTP 401
    faults: tuple[Fault, ...] = field(default_factory=tuple)
    pause_at_s: float | None = None
    pause_s: float = 0.0
    settle_requests: int = 0
    settle_ttft_ms: float = 0.0

    def ttft_s(self, request: int) -> float:
        """The TTFT of generation request number `request` (0 the first), in seconds: `ttft_ms`, or on the way down
        from `settle_ttft_ms` during the first `settle_requests`."""
        if request >= self.settle_requests:
            return self.ttft_ms / 1e3
        left = 1 - request / self.settle_requests
        return (self.ttft_ms + left * (self.settle_ttft_ms - self.ttft_ms)) / 1e3
