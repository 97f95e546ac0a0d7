"""One request's measured timeline: the unit every metric is computed from (live or simulated).

Times are `time.monotonic_ns()` (CLOCK_MONOTONIC, shared by all processes of the machine: the records of several
client worker processes merge onto one time line, and a local server's own timestamps are directly comparable).
Keeping the raw timeline, not pre-computed latencies, lets the metrics be recomputed with any definition and lets a
skeptic check them.
"""

from __future__ import annotations

import itertools
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict


class ErrorClass(StrEnum):
    """Why a request failed. Failed requests are counted by class, never dropped or averaged in."""

    HTTP_429 = "http_429"  # rate limited / queue full
    HTTP_4XX = "http_4xx"  # any other client error (bad request, context too long, unknown model...)
    HTTP_5XX = "http_5xx"  # server error status
    ERROR_EVENT = "error_event"  # `data: {"error": ...}` inside a 200 stream
    TRUNCATED = "truncated"  # the stream ended (clean close) before its terminator / [DONE]
    CONNECTION_RESET = "connection_reset"  # the connection was reset or broke mid-request
    CONNECT_ERROR = "connect_error"  # connection refused / unreachable
    CONNECT_TIMEOUT = "connect_timeout"
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"  # no output chunk within the first-token timeout
    INTER_TOKEN_TIMEOUT = "inter_token_timeout"  # a stall between chunks longer than the inter-token timeout
    INVALID_RESPONSE = "invalid_response"  # not valid UTF-8 / JSON / HTTP where it must be
    WORKER_LOST = "worker_lost"  # the client worker process running it died (or froze) before it ended


Phase = Literal["warmup", "measure", "cooldown"]
TokenSource = Literal["usage", "tokenizer", "chunks", "none"]


class EngineTimings(BaseModel):
    """The engine's own account of one request, as llama.cpp returns it with the answer (`timings`, in the last
    streamed chunk or the body): the prompt tokens it evaluated (`prompt_n`) and served from its prefix cache
    (`cache_n`), the tokens it generated (`predicted_n`), and its own times. `metrics.reconcile` checks servetune's
    figures against it, so a llama.cpp started without `--metrics` is reconciled too."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    prompt_n: int
    cache_n: int = 0
    prompt_ms: float | None = None
    predicted_n: int
    predicted_ms: float | None = None


class RequestRecord(BaseModel):
    """A request's timeline, token counts and outcome.

    `chunk_ns` holds the receive time of every streamed chunk that carried output (content or reasoning);
    role-only and usage-only chunks are not output. `first_content_ns` is the first chunk carrying content
    (not reasoning): with a reasoning model it marks the time to first *answer* token.
    """

    model_config = ConfigDict(frozen=False, extra="forbid")

    index: int
    traffic_class: str = "default"
    phase: Phase = "measure"
    conversation: int | None = None
    turn: int = 0
    scheduled_ns: int = 0
    dispatched_ns: int = 0
    sent_ns: int = 0
    done_ns: int = 0
    chunk_ns: list[int] = []
    first_content_ns: int | None = None
    stream: bool = True
    http_status: int | None = None
    finish_reason: str | None = None
    error_class: ErrorClass | None = None
    error: str | None = None
    prompt_tokens_expected: int | None = None
    prompt_tokens: int | None = None
    output_tokens_requested: int | None = None
    output_tokens: int = 0
    output_tokens_source: TokenSource = "none"
    usage_output_tokens: int | None = None
    tokenizer_output_tokens: int | None = None
    tokens_disagree: bool = False
    reasoning_tokens: int = 0
    reasoning_chunks: int = 0
    output_text: str | None = None
    worker: int = 0  # the client worker process that sent it (0 when the load ran in one process)
    engine_timings: EngineTimings | None = None
    """The engine's per-response account (llama.cpp's `timings`); None where the engine sends none."""
    transient: bool = False  # sent as measured, counted as warm-up after the run: its start-up transient (steady.py)
    loop_lag_first_ns: int = 0
    """How long the event loop of the client process that sent it was held up while it waited for its first chunk
    (`load/monitor.py`'s samples): what the client's own lateness can have added to its TTFT. 0: not measured."""
    loop_lag_stream_ns: int = 0  # ... and between its first chunk and its last: to its ITLs together

    def shift_clock(self, offset_ns: int) -> None:
        """Moves every time stamp by `offset_ns`: a record taken on another machine's monotonic clock onto the
        coordinator's time line. Durations (TTFT, ITL, TPOT, E2EL) do not change: they stay what the worker
        measured on its own clock, with no subtraction across machines."""
        self.scheduled_ns += offset_ns
        self.dispatched_ns += offset_ns
        self.sent_ns += offset_ns
        self.done_ns += offset_ns
        self.chunk_ns = [t + offset_ns for t in self.chunk_ns]
        if self.first_content_ns is not None:
            self.first_content_ns += offset_ns

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def ttft_ns(self) -> int | None:
        """Time to first output chunk (reasoning or content), from the moment the request was sent."""
        return self.chunk_ns[0] - self.sent_ns if self.chunk_ns else None

    @property
    def ttfc_ns(self) -> int | None:
        """Time to first content (non-reasoning) chunk."""
        return None if self.first_content_ns is None else self.first_content_ns - self.sent_ns

    @property
    def e2el_ns(self) -> int:
        return self.done_ns - self.sent_ns

    @property
    def tpot_ns(self) -> float | None:
        """vLLM's time per output token: (e2el − ttft) / (output tokens − 1), for a streamed answer of at
        least two tokens (None otherwise). The only place this formula is written."""
        if not self.chunk_ns or self.output_tokens < 2:
            return None
        return (self.done_ns - self.chunk_ns[0]) / (self.output_tokens - 1)

    @property
    def max_itl_ns(self) -> int | None:
        """The longest gap between two streamed chunks (None with fewer than two chunks)."""
        if len(self.chunk_ns) < 2:
            return None
        return max(b - a for a, b in itertools.pairwise(self.chunk_ns))

    @property
    def lateness_ns(self) -> int:
        """How late the client dispatched the request against its schedule (client saturation)."""
        return max(0, self.dispatched_ns - self.scheduled_ns)
