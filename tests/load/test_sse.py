"""The hand-written HTTP/1.1 + SSE parsing: any split of the bytes gives the same events and facts."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from servetune.load.http1 import Pool, _Conn
from servetune.load.sse import StreamState, parse_final


def _events(crlf: bool, reasoning: bool) -> bytes:
    nl = b"\r\n" if crlf else b"\n"
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for k in range(6):
        key = "reasoning_content" if reasoning and k < 2 else "content"
        chunks.append({"choices": [{"index": 0, "delta": {key: f" w{k}"}, "finish_reason": None}]})
    chunks.append({"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "length"}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}})
    out = b": ping" + nl + nl
    for c in chunks:
        out += b"data: " + json.dumps(c).encode() + nl + nl
    return out + b"data: [DONE]" + nl + nl


def _chunked(body: bytes, pieces: int) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    step = max(1, len(body) // pieces)
    frames = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + step]), body[i : i + step]) for i in range(0, len(body), step)
    )
    return head + frames + b"0\r\n\r\n"


@pytest.mark.parametrize("crlf", [False, True])
@pytest.mark.parametrize("reasoning", [False, True])
def test_any_split_gives_the_same_facts(crlf: bool, reasoning: bool) -> None:
    wire = _chunked(_events(crlf, reasoning), pieces=5)
    rng = random.Random(0)
    for trial in range(40):
        state = StreamState(stream=True, keep_outputs=True)
        conn = _Conn(Pool("http://127.0.0.1:1"))
        conn.sink, conn.state = state, 0  # reading the head
        conn.done = None
        cuts = sorted(rng.sample(range(1, len(wire)), rng.randint(0, 30))) if trial else []
        for a, b in itertools.pairwise([0, *cuts, len(wire)]):
            conn.data_received(wire[a:b])
        assert state.status == 200 and state.done
        assert len(state.chunk_ns) == 6, trial
        assert state.reasoning_chunks == (2 if reasoning else 0)
        facts = parse_final(state)
        assert facts["finish_reason"] == "length" and facts["usage"]["completion_tokens"] == 6
        assert facts["text"] == ("" if reasoning else " w0 w1") + " w2 w3 w4 w5"
        assert conn.state == 6  # idle again: the response ended


def test_error_event_and_invalid_utf8() -> None:
    state = StreamState(stream=True, keep_outputs=False)
    state.on_head(200, {"content-type": "text/event-stream"})
    state.on_body(b'data: {"choices":[{"text":" a"}]}\n\ndata: {"choices":[{"text":" \xff"}]}\n\n', 1)
    state.on_body(b'data: {"error": {"message": "boom", "code": 500}}\n\n', 2)
    assert state.invalid and "boom" in (state.error or "")
    assert len(state.chunk_ns) == 2


def test_empty_text_tokens_are_arrivals_but_role_and_closing_chunks_are_not() -> None:
    """vLLM streams a token whose text decodes to "" as a chunk with empty text (seen on the H200 with random
    weights: a quarter of the requests had no non-empty chunk at all). Each is a token arrival."""
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": None}]},
        {"choices": [{"index": 0, "text": " a", "finish_reason": None}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": None}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}},
    ]
    state = StreamState(stream=True, keep_outputs=False)
    state.on_head(200, {"content-type": "text/event-stream"})
    for t, event in enumerate(events):
        data = b"data: " + json.dumps(event).encode() + b"\n\n"
        state.on_body(data, now_ns=1000 * (t + 1))
    assert state.chunk_ns == [2000, 3000, 4000]
    assert parse_final(state)["finish_reason"] == "length"


@pytest.mark.parametrize(("usage_tokens", "arrivals"), [(3, [2000, 3000, 4000]), (4, [2000, 3000, 4000, 5000])])
def test_an_empty_last_token_with_the_finish_reason_counts_when_usage_says_so(
    usage_tokens: int, arrivals: list[int]
) -> None:
    """vLLM sends the last token together with the finish reason; when its text decodes to "" that chunk looks
    like llama.cpp's empty closing chunk. The H200 campaign lost it on ~40% of the records (one ITL short).
    The engine's usage count decides: one more token than text-bearing chunks means the closing chunk was it."""
    events = [
        {"choices": [{"index": 0, "text": "", "finish_reason": None}]},
        {"choices": [{"index": 0, "text": " a", "finish_reason": None}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": None}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]},
    ]
    state = StreamState(stream=True, keep_outputs=False)
    state.on_head(200, {"content-type": "text/event-stream"})
    for t, event in enumerate(events):
        state.on_body(b"data: " + json.dumps(event).encode() + b"\n\n", now_ns=1000 * (t + 2))
    state.settle_closing_chunk(usage_tokens)
    assert state.chunk_ns == arrivals
    state.settle_closing_chunk(usage_tokens)
    assert state.chunk_ns == arrivals, "settled once"


def _one_event_per_read(events: list[bytes]) -> StreamState:
    """Each event alone in its read, the way a paced stream arrives (the inline path's case)."""
    state = StreamState(stream=True, keep_outputs=True)
    state.on_head(200, {"content-type": "text/event-stream"})
    for k, event in enumerate(events):
        state.on_body(b"data: " + event + b"\n\n", k)
    return state


def test_the_learnt_token_prefix_never_takes_a_non_token_and_follows_a_changing_stream() -> None:
    """The inline path recognises a token by the bytes its stream's token events start with. What shares those
    bytes but is no token (an empty string, the closing chunk) is not taken, a field that changes before the
    text (a per-chunk counter) only sends events to the full scan, and a change of key is followed."""
    head = b'{"id":"cmpl-1","created":7,"choices":[{"index":0,"text":"'
    events = [
        head + b' a","finish_reason":null}]}',
        head + b' b","finish_reason":null}]}',
        head + b'","finish_reason":null}]}',  # an empty-text token: an arrival all the same (vLLM)
        head + b' c","finish_reason":null}]}',
        head + b'","finish_reason":"length"}]}',  # the closing chunk
        b'{"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":4}}',
    ]
    state = _one_event_per_read(events)
    facts = parse_final(state)
    state.settle_closing_chunk(facts["usage"]["completion_tokens"])
    assert state.chunk_ns == [0, 1, 2, 3]  # four tokens, as usage says: the closing chunk is none of them
    assert facts["finish_reason"] == "length" and facts["text"] == " a b c"
    varying = [b'{"n":%d,"choices":[{"index":0,"text":" t%d"}]}' % (k, k) for k in range(5)]
    assert _one_event_per_read(varying).chunk_ns == [0, 1, 2, 3, 4]
    switched = [b'{"choices":[{"delta":{"reasoning_content":" r"}}]}'] * 2
    switched += [b'{"choices":[{"delta":{"content":" x"}}]}'] * 3
    state = _one_event_per_read(switched)
    assert state.chunk_ns == [0, 1, 2, 3, 4] and state.reasoning_chunks == 2 and state.first_content_ns == 2


def test_a_read_that_ends_inside_a_known_token_event_waits_for_the_rest() -> None:
    head = b'data: {"choices":[{"text":"'
    state = StreamState(stream=True, keep_outputs=False)
    state.on_head(200, {"content-type": "text/event-stream"})
    state.on_body(head + b' a"}]}\n\n', 0)  # learns the prefix
    for cut in (head, head + b" b", head + b' b"}]}\n'):
        state.on_body(cut, 1)
        state.on_body((head + b' b"}]}\n\n')[len(cut) :], 2)
    assert state.chunk_ns == [0, 2, 2, 2]


LLAMACPP_CLOSING = (
    b'data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1796294693,'
    b'"model":"servetune-tiny","system_fingerprint":"b0-unknown","object":"text_completion","usage":'
    b'{"completion_tokens":4,"prompt_tokens":160,"total_tokens":164,"prompt_tokens_details":{"cached_tokens":0}},'
    b'"id":"chatcmpl-x7c4","timings":{"cache_n":0,"prompt_n":160,"prompt_ms":361.516,"prompt_per_token_ms":2.259475,'
    b'"prompt_per_second":442.58,"predicted_n":4,"predicted_ms":53.847,"predicted_per_token_ms":17.949,'
    b'"predicted_per_second":55.71}}\n\n'
)
"""llama.cpp's closing chunk of a streamed completion, as its server (xllamacpp) sends it: usage and its own
`timings`."""


def test_llama_cpp_timings_are_read_from_the_closing_chunk_only() -> None:
    state = StreamState(stream=True, keep_outputs=False)
    state.on_head(200, {"content-type": "text/event-stream"})
    token = (
        b'data: {"choices":[{"text":" valu","index":0,"logprobs":null,"finish_reason":null}],"id":"chatcmpl-x7c4"}\n\n'
    )
    for t in range(3):
        state.on_body(token, now_ns=t + 1)
    assert state.others == [], "token chunks take the fast path: nothing kept to parse"
    state.on_body(LLAMACPP_CLOSING + b"data: [DONE]\n\n", now_ns=9)
    facts = parse_final(state)
    assert facts["timings"]["prompt_n"] == 160 and facts["timings"]["cache_n"] == 0
    assert facts["timings"]["predicted_n"] == 4 and facts["usage"]["prompt_tokens"] == 160
    body = StreamState(stream=False, keep_outputs=False)
    body.on_head(200, {"content-type": "application/json"})
    body.on_body(json.dumps({"choices": [{"text": " a"}], "timings": {"prompt_n": 1, "cache_n": 159}}).encode(), 1)
    assert parse_final(body)["timings"] == {"prompt_n": 1, "cache_n": 159}
