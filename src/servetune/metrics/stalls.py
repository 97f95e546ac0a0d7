"""Server stalls: moments when no stream received a token, every stream in flight waiting at once.

A stall is the server's, not a request's: an engine that compiles a kernel for a batch size it has not seen (an MoE
model on an H200: every stream of a c8 point waited ~2.5 s at once, against ~10 ms ITLs, and half the measured
requests' TTFTs were 2.5 s), swaps, or is descheduled, stops every stream together. One slow stream is not one:
the others go on receiving tokens, and a gap in one stream is that request's ITL, in the percentiles already.

The rule, over the union of every streamed record's token arrivals (all phases: a warm-up stream that receives a
token shows the server working):

- a gap between two token arrivals of the server counts from the moment a token was owed: at once when a stream
  was decoding (it had a token before the gap), else from the earliest send + expected prefill of the streams
  waiting for their first token. The expected prefill is the run's 10th-percentile TTFT, times the request's
  prompt tokens over the run's median (never less): a wave of prompts prefilled together is no stall, and a
  stall at a wave's start is still seen, though it lengthens half the TTFTs of a run (the 10th percentile is not
  moved by it);
- it is a stall when it lasts `STALL_ITL_FACTOR` (50) times the run's median ITL and at least `STALL_MIN_S` (1 s),
  with at least `STALL_MIN_STREAMS` (2) requests in flight throughout (one stream alone is a slow stream).

Why 50x and 1 s: a stall must lie far outside the server's ordinary rhythm — ITL jitter, a step that carries a
prefill chunk, a Python engine's garbage collection — and be long enough to move a figure; the compile stall above
is 250x its ITL and 2.5 s long, while vLLM CPU's longest server-wide gap in 64-request c4 and c8 runs of the tiny
model, on a shared 2-core machine at a load average of about 10, was 0.40-0.60 s (30x its median ITL). 50x alone
would flag 0.5 s at 10 ms ITLs, and a prefill step of 8,192 tokens of a 27B model takes 0.5-0.8 s on one
H100-class GPU: the 1 s floor keeps a large `max_num_batched_tokens` step (a config's steady behaviour, which its
latency percentiles show) from being called a stall. A slow engine (200 ms ITLs) needs 10 s, its own scale. A
machine too busy for its server stalls it for real, and that is reported as what it is: llama.cpp on the same
machine went 1.4-2.9 s without a token (84-258x its median ITL).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from servetune.metrics.record import RequestRecord

STALL_ITL_FACTOR = 50.0  # a stall lasts at least this many median ITLs ...
STALL_MIN_S = 1.0  # ... and at least this long
STALL_MIN_STREAMS = 2  # requests in flight throughout: one alone is a slow stream, not a stalled server
PREFILL_QUANTILE = 10.0  # the percentile of TTFT that a prompt of the run's median length is expected to take


class Stall(BaseModel):
    """One stall: when it began (seconds since the run's first request was sent), how long no stream received a
    token, and the requests in flight during it."""

    model_config = ConfigDict(frozen=True)

    at_s: float
    seconds: float
    requests: int
    measured: int  # of those, measured ones


def find_stalls(records: Sequence[RequestRecord]) -> list[Stall]:
    """Every stall of a run (see the module's rule), in time order; none without two streamed requests. One that
    touched no measured request (in the warm-up, where stalls are what it is there to absorb) is listed with
    `measured` 0."""
    streamed = [r for r in records if r.stream]
    if len(streamed) < STALL_MIN_STREAMS:
        return []
    sent = np.array([r.sent_ns for r in streamed], dtype=np.int64)
    done = np.array([r.done_ns for r in streamed], dtype=np.int64)
    first = np.array([r.chunk_ns[0] if r.chunk_ns else np.iinfo(np.int64).max for r in streamed], dtype=np.int64)
    measured = np.array([r.phase == "measure" for r in streamed])
    tokens = np.sort(np.concatenate([np.asarray(r.chunk_ns, dtype=np.int64) for r in streamed] + [sent[:0]]))
    if not len(tokens):
        return []
    gaps = [np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) for r in streamed if r.ok and len(r.chunk_ns) > 1]
    itl = float(np.median(np.concatenate(gaps))) if gaps else 0.0
    threshold = max(STALL_ITL_FACTOR * itl, STALL_MIN_S * 1e9)
    prefill = _expected_prefill(streamed)
    # Every gap between two token arrivals (and from the first send to the first token) long enough to hold one.
    edges = np.concatenate([[sent.min()], tokens])
    starts, ends = edges[:-1], edges[1:]
    long = np.flatnonzero(ends - starts >= threshold)
    t0 = int(sent.min())
    stalls = []
    for i in long:
        a, b = int(starts[i]), int(ends[i])
        waiting = (sent < b) & (done >= b)
        if waiting.sum() < STALL_MIN_STREAMS:
            continue
        decoding = waiting & (first <= a)
        owed = a if decoding.any() else max(a, int((sent[waiting] + prefill[waiting]).min()))
        through = waiting & (sent <= owed)
        if b - owed < threshold or through.sum() < STALL_MIN_STREAMS:
            continue
        touched = (sent < b) & (done > owed)
        stalls.append(
            Stall(
                at_s=(owed - t0) / 1e9,
                seconds=(b - owed) / 1e9,
                requests=int(touched.sum()),
                measured=int((touched & measured).sum()),
            )
        )
    return stalls


def _expected_prefill(streamed: Sequence[RequestRecord]) -> np.ndarray:
    """Per request, how long its first token may take without the server being stalled (ns): the run's low TTFT,
    scaled up for prompts longer than the run's median."""
    ttfts = [r.ttft_ns for r in streamed if r.ok and r.ttft_ns is not None]
    low = float(np.percentile(ttfts, PREFILL_QUANTILE)) if ttfts else 0.0
    prompts = np.array([r.prompt_tokens or r.prompt_tokens_expected or 0 for r in streamed], dtype=float)
    median = float(np.median(prompts)) if prompts.any() else 0.0
    scale = np.maximum(1.0, prompts / median) if median > 0 else np.ones(len(streamed))
    return (low * scale).astype(np.int64)


def touched(records: Sequence[RequestRecord], stalls: Sequence[Stall]) -> list[bool]:
    """Per record, whether a stall of `stalls` (found in these records) touched it: in flight during it."""
    sent = [r.sent_ns for r in records if r.stream]
    if not sent or not stalls:
        return [False] * len(records)
    t0 = min(sent)
    spans = [(t0 + round(s.at_s * 1e9), t0 + round((s.at_s + s.seconds) * 1e9)) for s in stalls]
    return [any(r.sent_ns < end and r.done_ns > start for start, end in spans) for r in records]
