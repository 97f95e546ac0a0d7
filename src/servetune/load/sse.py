"""Turns an OpenAI-style response (SSE stream or JSON body) into the facts of a `RequestRecord`.

The per-chunk path is the client's hot loop, so it never parses JSON for ordinary token chunks: a read that
holds one whole event starting with the bytes this stream's token events start with (`StreamState.prefix`) is a
token at once; anything else is split into events with `bytes.find` and classified with one compiled regular
expression (is there a non-empty `text`/`content`/`reasoning_content`/`reasoning` string?). Each output chunk is
stamped with the arrival time of its bytes. JSON is parsed only where it decides something: error events, the
last chunk with a finish reason, the last `usage` (and llama.cpp's `timings` beside it), and (when a tokenizer must
count the text) the output chunks at the end of the request.
"""

from __future__ import annotations

import json
import re

# A non-empty output string in a completions (`text`) or chat (`content`, `reasoning_content`, `reasoning`)
# chunk. Inside JSON strings quotes are escaped, so these keys cannot be matched inside generated text.
_OUTPUT = re.compile(rb'"(text|content|reasoning_content|reasoning)"\s*:\s*"[^"]')
_CONTENT_KEY = re.compile(rb'"(text|content)"\s*:\s*"[^"]')
# An empty `text`/`content` string in a chunk that is not a role announcement: the engine streamed a token
# whose text is empty (vLLM does this for ids its detokenizer maps to "", e.g. random weights or held-back
# partial UTF-8). It is still a token arrival, as vLLM's own `bench serve` counts it. Role announcements
# and closing chunks are not.
_EMPTY_TOKEN = re.compile(rb'"(text|content)"\s*:\s*""')
# A set finish reason: an empty chunk carrying one is a closing chunk (llama.cpp, OpenAI), not a token.
_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"')
_NO_PREFIX = b"\xff"  # matches no event (events start with ASCII): the prefix before the first token is known


class StreamState:
    """What one streamed response has delivered so far."""

    __slots__ = (
        "body",
        "chunk_ns",
        "closing_ns",
        "counting",
        "crlf",
        "done",
        "error",
        "first_content_ns",
        "hint",
        "invalid",
        "keep_outputs",
        "key",
        "key_is_reasoning",
        "key_len",
        "last",
        "last_hi",
        "last_lo",
        "others",
        "outputs",
        "pending",
        "prefix",
        "prefix_len",
        "reasoning_chunks",
        "status",
        "stream",
    )

    def __init__(self, stream: bool, keep_outputs: bool) -> None:
        self.status = 0
        self.chunk_ns: list[int] = []
        self.closing_ns: int | None = None
        """Arrival of an empty-text chunk that carried the finish reason: a closing chunk (llama.cpp) or the last
        token whose text is empty (vLLM); the usage count decides which (`settle_closing_chunk`)."""
        self.first_content_ns: int | None = None
        self.reasoning_chunks = 0
        self.pending = b""
        self.done = False
        self.error: str | None = None
        self.invalid: str | None = None
        self.last: bytes | None = None  # the bytes holding the last output chunk, at [last_lo:last_hi]
        self.last_lo = 0
        self.last_hi = 0
        self.crlf: bool | None = None
        self.others: list[bytes] = []
        self.key = b'"text":"'  # the output key the inline path looks for; adapts to the stream
        self.key_len = len(self.key)
        self.key_is_reasoning = False
        self.hint = 0
        self.prefix = _NO_PREFIX
        """The bytes every token event of this stream starts with, up to its output string (`data: {"id":…,
        "choices":[{"index":0,"text":"`): servers repeat them verbatim in every chunk of one answer (same id,
        creation time, model, key order), so one comparison recognises a token. Learnt from the first token
        event; an event that differs (another key, a varying field) takes the full scan, which learns again."""
        self.prefix_len = 0
        self.outputs: list[bytes] = []
        self.keep_outputs = keep_outputs
        self.counting = True  # a token must update more than its time stamp (first content, reasoning, text)
        self.body: list[bytes] = []
        self.stream = stream

    def on_head(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        if status != 200 or "text/event-stream" not in headers.get("content-type", ""):
            self.stream = False  # an error body or a plain JSON answer: keep it whole

    def on_body(self, data: bytes, now_ns: int, lo: int = 0, hi: int = -1) -> None:
        """Body bytes data[lo:hi] (offsets, so the HTTP layer never copies a chunk) that arrived at now_ns."""
        if hi < 0:
            hi = len(data)
        if not self.pending and data.startswith(self.prefix, lo, hi):
            # The common case, inline and without copies: one whole event (its only line end is its own) that
            # starts as this stream's token events do, holding a non-empty string, in valid UTF-8.
            i = lo + self.prefix_len
            if (
                data.find(b"\n", i, hi) == hi - 2 > i
                and data[hi - 1] == 10
                and data[i] != 34
                and (data.isascii() or _utf8(data, lo, hi))
            ):
                self.chunk_ns.append(now_ns)
                self.last, self.last_lo, self.last_hi = data, lo + 6, hi - 2
                if self.counting:
                    self._count(data, lo + 6, hi - 2, now_ns)
                return
        if not self.stream:
            self.body.append(data[lo:hi])
            return
        self._scan(data, now_ns, lo, hi)

    def _scan(self, data: bytes, now_ns: int, lo: int, hi: int) -> None:
        """Every event of the bytes in one pass: several events (a read that holds many tokens), partial ones,
        CRLF line ends, other keys and every odd case (`_event`)."""
        if self.pending:
            data = self.pending + data[lo:hi]
            lo, hi = 0, len(data)
            self.pending = b""
        if self.crlf is None:  # the first line end decides whether this stream ends its lines with CRLF
            if data.find(b"\r", lo, hi) >= 0:
                self.crlf = True
            elif data.find(b"\n", lo, hi) >= 0:
                self.crlf = False
            else:
                self.pending = data[lo:hi]
                return
        if self.crlf:
            data = data[lo:hi].replace(b"\r\n", b"\n")
            lo, hi = 0, len(data)
        plain = data.isascii()  # non-ASCII bytes: the slow path checks them event by event
        find = data.find
        startswith = data.startswith
        key, klen = self.key, self.key_len
        start = lo
        while True:
            end = find(b"\n", start, hi)  # one byte: memchr, several times faster than looking for two
            if end < 0:
                break
            if end + 1 >= hi or data[end + 1] != 10:  # a multi-line event, or its end not here yet
                end = find(b"\n\n", end, hi)
                if end < 0:
                    break
            # As on the fast path: `data: {...}` holding a non-empty string under the key seen last time.
            p = start + 6
            if plain and startswith(b"data: {", start):
                i = p + self.hint
                if not startswith(key, i):
                    i = find(key, p, end)
                    self.hint = i - p
                if i > p and data[i + klen] != 34 and not startswith(b'{"error"', p):
                    self.chunk_ns.append(now_ns)
                    self.last, self.last_lo, self.last_hi = data, p, end
                    if not startswith(self.prefix, start):
                        self.prefix = data[start : i + klen]
                        self.prefix_len = len(self.prefix)
                    if self.counting:
                        self._count(data, p, end, now_ns)
                    start = end + 2
                    continue
            self._event(data[start:end], now_ns)
            key, klen = self.key, self.key_len
            start = end + 2
        self.pending = data[start:hi] if start < hi else b""

    def _count(self, data: bytes, lo: int, hi: int, now_ns: int) -> None:
        """A token's other facts: a reasoning chunk, the first content, its text (kept when asked)."""
        if self.key_is_reasoning:
            self.reasoning_chunks += 1
        elif self.first_content_ns is None:
            self.first_content_ns = now_ns
        if self.keep_outputs:
            self.outputs.append(data[lo:hi])
        self.counting = self.key_is_reasoning or self.keep_outputs

    @property
    def last_output(self) -> bytes | None:
        """The last output chunk's JSON (its finish_reason is read once, at the end)."""
        return None if self.last is None else self.last[self.last_lo : self.last_hi]

    def _event(self, event: bytes, now_ns: int) -> None:
        """Any event the inline path did not take: other keys, errors, usage, [DONE], comments, odd framing."""
        if event.startswith(b"data:"):
            payload = b"\n".join(ln[5:].lstrip(b" ") for ln in event.split(b"\n") if ln.startswith(b"data:"))
        else:  # comments (": ping"), `event:` lines, multi-line events
            lines = [ln for ln in event.split(b"\n") if ln.startswith(b"data:")]
            if not lines:
                return
            payload = b"\n".join(ln[5:].lstrip(b" ") for ln in lines)
            if b"event: error" in event:
                self.error = payload.decode("utf-8", "replace")[:500]
                return
        if payload == b"[DONE]":
            self.done = True
            return
        if not payload.isascii():
            try:
                payload.decode()
            except UnicodeDecodeError as err:
                self.invalid = f"invalid UTF-8 in a streamed chunk: {err}"
        if b'"error"' in payload and self.error is None:
            self._maybe_error(payload)
        m = _OUTPUT.search(payload)
        if m is not None:
            self.key = m.group(0)[:-1]
            self.key_len = len(self.key)
            self.key_is_reasoning = m.group(1)[0] == 114  # b"r"
            self.counting = True
            self.chunk_ns.append(now_ns)
            self.last, self.last_lo, self.last_hi = payload, 0, len(payload)
            if self.key_is_reasoning:
                self.reasoning_chunks += 1
                if self.first_content_ns is None and _CONTENT_KEY.search(payload) is not None:
                    self.first_content_ns = now_ns
            elif self.first_content_ns is None:
                self.first_content_ns = now_ns
            if self.keep_outputs:
                self.outputs.append(payload)
        elif b'"role"' not in payload and _EMPTY_TOKEN.search(payload):
            if _FINISHED.search(payload):
                self.closing_ns = now_ns
            else:
                self.chunk_ns.append(now_ns)  # a token with empty text: it arrived, its text adds nothing
            self.others.append(payload)  # may carry the finish reason
        else:
            self.others.append(payload)  # role-only, finish-only and usage chunks: read once at the end

    def settle_closing_chunk(self, usage_output_tokens: int | None) -> None:
        """Counts the empty closing chunk as a token when the engine says it sent one more token than arrived in
        text-bearing chunks (vLLM streams the last token with the finish reason, and its text may be empty;
        llama.cpp closes with an empty chunk of its own). Without a usage count it stays uncounted."""
        if self.closing_ns is not None and usage_output_tokens is not None and usage_output_tokens > len(self.chunk_ns):
            self.chunk_ns.append(self.closing_ns)
            self.closing_ns = None

    def _maybe_error(self, payload: bytes) -> None:
        try:
            obj = json.loads(payload)
        except ValueError:
            return
        if isinstance(obj, dict) and (obj.get("error") or obj.get("object") == "error"):
            err = obj.get("error") or obj
            self.error = json.dumps(err)[:500] if not isinstance(err, str) else err[:500]


def _utf8(data: bytes, lo: int, hi: int) -> bool:
    """Whether data[lo:hi] is valid UTF-8 (a stream of non-ASCII text still takes the fast path)."""
    try:
        data[lo:hi].decode()
    except UnicodeDecodeError:
        return False
    return True


def parse_final(state: StreamState) -> dict:
    """Facts decided once per request: finish reason, usage, the engine's own `timings` (llama.cpp sends them
    with the usage, in its closing chunk), output text (when kept), error details."""
    facts: dict = {"finish_reason": None, "usage": None, "timings": None, "text": None, "reasoning_text": None}
    if not state.stream:
        raw = b"".join(state.body)
        facts["raw"] = raw
        try:
            obj = json.loads(raw) if raw else {}
        except ValueError:
            return facts
        if not isinstance(obj, dict):
            return facts
        if obj.get("error") or obj.get("object") == "error":
            err = obj.get("error") or obj
            facts["error"] = err if isinstance(err, str) else json.dumps(err)[:500]
        facts["usage"] = obj.get("usage")
        facts["timings"] = obj.get("timings")
        choices = obj.get("choices") or []
        if choices:
            choice = choices[0]
            facts["finish_reason"] = choice.get("finish_reason")
            message = choice.get("message") or {}
            facts["text"] = choice.get("text") if "text" in choice else message.get("content")
            facts["reasoning_text"] = message.get("reasoning_content") or message.get("reasoning")
        return facts
    last = state.last_output
    for payload in ([last] if last is not None else []) + state.others:
        try:
            obj = json.loads(payload)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        choices = obj.get("choices") or []
        if choices and isinstance(choices[0], dict) and choices[0].get("finish_reason"):
            facts["finish_reason"] = choices[0]["finish_reason"]
        if obj.get("usage"):
            facts["usage"] = obj["usage"]
        if obj.get("timings"):
            facts["timings"] = obj["timings"]
    if state.keep_outputs:
        texts, reasoning = [], []
        for payload in state.outputs:
            try:
                choice = json.loads(payload)["choices"][0]
            except (ValueError, KeyError, IndexError, TypeError):
                continue
            delta = choice.get("delta") or {}
            texts.append(choice.get("text") or delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
        facts["text"] = "".join(texts)
        facts["reasoning_text"] = "".join(reasoning)
    return facts
