"""A run over time: requests in flight, output tokens per second and each request's TTFT against when it was sent.

These show what a single number hides: a warm-up that was not excluded (TTFT high at the start), a server that
saturates during the run (requests in flight and TTFT climbing while the token rate stays flat), a drain at the end.
Times are seconds from the run's first send (warm-up included), so the phases can be drawn as they happened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servetune.metrics.record import Phase, RequestRecord


@dataclass(frozen=True)
class Timeline:
    """The series of a run (seconds from its first send)."""

    in_flight: list[tuple[float, float]]
    """A step series: (time, requests in flight from then on)."""
    tokens_per_s: list[tuple[float, float]]
    """(bucket middle, output chunks received in the bucket / bucket seconds)."""
    ttft: list[tuple[float, float]]
    """(send time, TTFT in ms) of each completed streamed request."""
    phases: list[tuple[Phase, float, float]]
    """(phase, first send, last end) of the warm-up, measured and cool-down requests."""
    bucket_s: float


def timeline(records: Sequence[RequestRecord], buckets: int = 40) -> Timeline | None:
    """The timeline of a run's records (None without any)."""
    if not records:
        return None
    t0 = min(r.sent_ns for r in records)
    end = max(r.done_ns for r in records)
    span = max((end - t0) / 1e9, 1e-3)
    bucket = _round_bucket(span / buckets)
    events = sorted([(r.sent_ns, 1) for r in records] + [(r.done_ns, -1) for r in records])
    steps: list[tuple[float, float]] = [(0.0, 0.0)]
    current = 0
    for t, step in events:
        current += step
        steps.append(((t - t0) / 1e9, float(current)))
    counts = [0] * (int(span / bucket) + 1)
    for r in records:
        if r.ok:
            for c in r.chunk_ns:
                counts[min(int((c - t0) / 1e9 / bucket), len(counts) - 1)] += 1
    rates = [((i + 0.5) * bucket, n / bucket) for i, n in enumerate(counts)]
    ttft = [((r.sent_ns - t0) / 1e9, r.ttft_ns / 1e6) for r in records if r.ok and r.ttft_ns is not None]
    phases: list[tuple[Phase, float, float]] = []
    for phase in ("warmup", "measure", "cooldown"):
        group = [r for r in records if r.phase == phase]
        if group:
            phases.append(
                (phase, (min(r.sent_ns for r in group) - t0) / 1e9, (max(r.done_ns for r in group) - t0) / 1e9)
            )
    return Timeline(in_flight=steps, tokens_per_s=rates, ttft=ttft, phases=phases, bucket_s=bucket)


def _round_bucket(seconds: float) -> float:
    """A bucket width of 1, 2 or 5 times a power of ten seconds (at least 10 ms)."""
    seconds = max(seconds, 0.01)
    mag = 10 ** math.floor(math.log10(seconds))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= seconds)
