"""Sends one request over a keep-alive connection and turns what came back into a `RequestRecord`.

Every way a request can go wrong ends up as an `ErrorClass` on its record: HTTP status, an error event in the
stream, a stream that stops without its end, a reset, a refused connection, or one of the three timeouts
(enforced by `Watchdog`, one cheap periodic scan instead of a timer per chunk).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable

from pydantic import ValidationError

from servetune.load.http1 import Pool, ResponseError, _Conn
from servetune.load.prompts import Conversation, Turn
from servetune.load.shape import Timeouts
from servetune.load.sse import StreamState, parse_final
from servetune.metrics.record import EngineTimings, ErrorClass, Phase, RequestRecord

_now = time.monotonic_ns
_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in RequestRecord.model_fields.items()
    if not field.is_required()
}


class _Timeout(Exception):
    def __init__(self, cls: ErrorClass, message: str) -> None:
        super().__init__(message)
        self.cls = cls


class Watchdog:
    """Aborts in-flight requests that pass a first-token, inter-token or whole-request limit."""

    def __init__(self, timeouts: Timeouts, interval_s: float = 0.05) -> None:
        self.t = timeouts
        self.interval_s = interval_s
        self.inflight: dict[_Conn, tuple[StreamState, int]] = {}

    async def run(self) -> None:
        first, gap, whole = (int(x * 1e9) for x in (self.t.first_token_s, self.t.inter_token_s, self.t.request_s))
        while True:
            await asyncio.sleep(self.interval_s)
            now = _now()
            for conn, (state, sent) in list(self.inflight.items()):
                if now - sent > whole:
                    conn.abort(
                        _Timeout(
                            ErrorClass.FIRST_TOKEN_TIMEOUT if not state.chunk_ns else ErrorClass.INTER_TOKEN_TIMEOUT,
                            f"no end after {self.t.request_s} s",
                        )
                    )
                elif not state.stream:
                    continue
                elif not state.chunk_ns:
                    if now - sent > first:
                        conn.abort(
                            _Timeout(ErrorClass.FIRST_TOKEN_TIMEOUT, f"no output within {self.t.first_token_s} s")
                        )
                elif now - max(conn.last_ns, state.chunk_ns[-1]) > gap:
                    conn.abort(
                        _Timeout(ErrorClass.INTER_TOKEN_TIMEOUT, f"stalled for more than {self.t.inter_token_s} s")
                    )


class Client:
    """Builds request bytes for one endpoint and runs requests through a pool."""

    def __init__(
        self,
        pool: Pool,
        model: str,
        endpoint: str,
        stream: bool,
        api_key: str | None,
        extra_body: dict | None,
        output_control: str,
        count_output: Callable[[str], int] | None,
        keep_text: bool,
        watchdog: Watchdog,
    ) -> None:
        self.pool = pool
        self.model = model
        self.path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
        self.stream = stream
        self.headers = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self.extra_body = extra_body or {}
        self.output_control = output_control
        self.count_output = count_output  # a local tokenizer: counts output text (usage fallback, cross-check)
        self.keep_text = keep_text
        self.watchdog = watchdog

    async def run_conversation(
        self,
        conv: Conversation,
        phase: Phase,
        scheduled_ns: int,
        dispatched_ns: int,
        emit: Callable[[RequestRecord], None],
    ) -> None:
        """Sends a conversation's turns one after another, each after the previous answer; `emit` gets every
        record as it ends. A failed turn ends the conversation (the next turn would hold a history it lacks)."""
        for k, turn in enumerate(conv.turns):
            rec = RequestRecord.model_construct(
                **{
                    **_DEFAULTS,
                    "index": conv.index,
                    "traffic_class": conv.cls,
                    "phase": phase,
                    "conversation": conv.index,
                    "turn": k,
                    "scheduled_ns": scheduled_ns,
                    "dispatched_ns": dispatched_ns,
                    "chunk_ns": [],
                }
            )
            rec = await self.send(turn, rec)
            emit(rec)
            if not rec.ok:
                break
            scheduled_ns = dispatched_ns = _now()  # the next turn follows the answer at once

    def body(self, turn: Turn) -> bytes:
        body: dict = {"model": self.model, **turn.fields, "stream": self.stream}
        if turn.max_tokens is not None:
            body["max_tokens"] = turn.max_tokens
            if self.output_control == "ignore_eos":
                body["ignore_eos"] = True
            elif self.output_control == "min_tokens":
                body["min_tokens"] = turn.max_tokens
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return self.pool.build(self.path, json.dumps(body).encode(), self.headers)

    async def send(self, turn: Turn, record: RequestRecord) -> RequestRecord:
        """Runs one request; fills the record's timeline, tokens and outcome. Never raises for server faults."""
        data = self.body(turn)
        state = StreamState(self.stream, keep_outputs=self.keep_text or self.count_output is not None)
        record.stream = self.stream
        record.prompt_tokens_expected = turn.prompt_tokens
        record.output_tokens_requested = turn.max_tokens
        for attempt in (0, 1):
            try:
                conn = await self.pool.acquire(fresh=attempt > 0)
            except TimeoutError:
                return self._failed(
                    record, ErrorClass.CONNECT_TIMEOUT, f"connect timed out after {self.pool.connect_timeout_s} s"
                )
            except OSError as err:
                return self._failed(record, ErrorClass.CONNECT_ERROR, f"cannot connect: {err}")
            reused = conn.pooled
            record.sent_ns = _now()
            fut = conn.request(data, state)
            self.watchdog.inflight[conn] = (state, record.sent_ns)
            error: tuple[ErrorClass, str] | None = None
            try:
                await fut
            except ResponseError as err:
                cls = {"reset": ErrorClass.CONNECTION_RESET, "truncated": ErrorClass.TRUNCATED}.get(
                    err.kind, ErrorClass.INVALID_RESPONSE
                )
                error = (cls, str(err))
            except _Timeout as err:
                error = (err.cls, str(err))
            finally:
                self.watchdog.inflight.pop(conn, None)
            # A connection from the idle pool (kept alive, or opened ahead of the run) that the server closed just
            # as we used it (its idle timeout, a proxy's reload): nothing was answered, so the request is sent
            # again once on a fresh connection, as HTTP clients do.
            if (
                error is not None
                and reused
                and attempt == 0
                and state.status == 0
                and error[0] != ErrorClass.FIRST_TOKEN_TIMEOUT
            ):
                state = StreamState(self.stream, keep_outputs=state.keep_outputs)
                continue
            break
        # a normal end: the arrival of the last bytes; a failure: when it was noticed
        record.done_ns = conn.last_ns if error is None else _now()
        record.chunk_ns = state.chunk_ns
        record.first_content_ns = state.first_content_ns
        record.reasoning_chunks = state.reasoning_chunks
        record.http_status = state.status or None
        facts = parse_final(state)
        if error is None:
            error = self._classify(state, facts)
        self._tokens(record, state, facts)
        record.finish_reason = facts["finish_reason"]
        if error is None and facts.get("error"):
            error = (ErrorClass.ERROR_EVENT, str(facts["error"]))
        if error is not None:
            record.error_class, record.error = error
        return record

    @staticmethod
    def _failed(record: RequestRecord, cls: ErrorClass, message: str) -> RequestRecord:
        record.sent_ns = record.done_ns = _now()
        record.error_class, record.error = cls, message
        return record

    @staticmethod
    def _classify(state: StreamState, facts: dict) -> tuple[ErrorClass, str] | None:
        status = state.status
        if status != 200:
            text = b"".join(state.body).decode("utf-8", "replace")[:300]
            if status == 429:
                return ErrorClass.HTTP_429, text
            return (ErrorClass.HTTP_5XX if status >= 500 else ErrorClass.HTTP_4XX), f"HTTP {status}: {text}"
        if state.error is not None:
            return ErrorClass.ERROR_EVENT, state.error
        if state.invalid is not None:
            return ErrorClass.INVALID_RESPONSE, state.invalid
        if state.stream and not state.done and facts["finish_reason"] is None:
            return ErrorClass.TRUNCATED, "the stream ended without a finish reason or [DONE]"
        return None

    def _tokens(self, record: RequestRecord, state: StreamState, facts: dict) -> None:
        timings = facts.get("timings")
        if isinstance(timings, dict):
            # An engine's odd timings are its own: the request is still measured, it is just not reconciled by them.
            with contextlib.suppress(ValidationError):
                record.engine_timings = EngineTimings.model_validate(timings)
        usage = facts.get("usage") or {}
        if usage:
            record.prompt_tokens = usage.get("prompt_tokens")
            record.usage_output_tokens = usage.get("completion_tokens")
            state.settle_closing_chunk(record.usage_output_tokens)
            details = usage.get("completion_tokens_details") or {}
            record.reasoning_tokens = int(details.get("reasoning_tokens") or 0)
        text = (facts.get("reasoning_text") or "") + (facts.get("text") or "")
        if self.keep_text:
            record.output_text = facts.get("text")
        if self.count_output is not None and (facts.get("text") is not None or facts.get("reasoning_text") is not None):
            record.tokenizer_output_tokens = self.count_output(text)
        if record.usage_output_tokens is not None:
            record.output_tokens, record.output_tokens_source = record.usage_output_tokens, "usage"
            if record.tokenizer_output_tokens is not None:
                diff = abs(record.tokenizer_output_tokens - record.usage_output_tokens)
                record.tokens_disagree = diff > max(1, 0.02 * record.usage_output_tokens)
        elif record.tokenizer_output_tokens is not None:
            record.output_tokens, record.output_tokens_source = record.tokenizer_output_tokens, "tokenizer"
        elif state.stream and state.chunk_ns:
            record.output_tokens, record.output_tokens_source = len(state.chunk_ns), "chunks"
        elif not state.stream and facts.get("text"):
            record.output_tokens, record.output_tokens_source = len(facts["text"].split()), "chunks"
