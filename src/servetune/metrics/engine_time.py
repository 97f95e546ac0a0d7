"""Where a load point's time to first token went, by the engine's own account (vLLM's /metrics, or the simulator's).

vLLM stamps each request as it goes (`vllm/v1/metrics/stats.py`, the same in 0.24 and 0.32) and, when it
finishes, observes its intervals in histograms:

- `vllm:request_queue_time_seconds`: queued in the engine core → first scheduled (waiting for a slot, the token
  budget or KV blocks);
- `vllm:request_prefill_time_seconds`: first scheduled → the engine core's output carrying its first token (its
  prompt's steps, shared with other requests' decodes or not, the waits between chunks, preemptions while
  prefilling);
- `vllm:request_decode_time_seconds`: first token → last token (engine core), `vllm:request_inference_time_seconds`:
  first scheduled → last token;
- `vllm:time_to_first_token_seconds` (observed at the first token, finished or not): the API server's arrival stamp
  (taken before it renders and tokenizes the prompt) → the API server's handling of the first token.

Read as deltas between a scrape before and after the point, each histogram's mean (Δsum / Δcount) is exact, so
the mean TTFT the client saw splits into parts that add up:

    client TTFT = queue + prefill + API server + HTTP
    API server  = vLLM's TTFT − queue − prefill   (tokenizing, the hand-over to the engine core and back)
    HTTP        = client TTFT − vLLM's TTFT       (parsing the request before vLLM's stamp, detokenizing and
                                                   streaming the first chunk, the network, the client's read)

Percentiles come from the buckets (`histogram.py`: a value and the bucket it lies in). The deltas cover every
request the engine served between the scrapes — warm-ups included, the engine counted them — so the client's side
of the split is the mean over the same requests: every one of the point that got a first token. Aborted requests
(warm-up or cool-down requests still in flight when the point ends) have a TTFT in vLLM's histogram but no queue
or prefill time; a note says when the counts differ. Beside the parts: tokens per engine iteration
(`vllm:iteration_tokens_total`: a prompt counts in the iteration of its first token), preemptions, prefix-cache
hits (through `prometheus.delta`), and the running and waiting requests sampled over the point.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from servetune.metrics.histogram import Histogram, Quantile
from servetune.metrics.prometheus import MetricsSnapshot, delta
from servetune.metrics.record import RequestRecord

HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
    "inference": "vllm:request_inference_time_seconds",
}
"""The engine's per-request intervals, by vLLM's names (the simulator exposes the same)."""
ITERATION_TOKENS = "vllm:iteration_tokens_total"
"""A histogram despite its name: tokens per engine iteration."""
FINISHED = HISTOGRAMS["prefill"]
"""Observed when a request finishes: its count says how many requests the engine has accounted for."""


class Interval(BaseModel):
    """One of the engine's per-request intervals over a load point (ms): exact mean, percentiles by bucket."""

    model_config = ConfigDict(frozen=True)

    requests: int
    mean_ms: float
    p50: Quantile | None
    p99: Quantile | None

    @classmethod
    def of(cls, hist: Histogram) -> Interval | None:
        mean = hist.mean
        if mean is None:
            return None
        p50, p99 = hist.quantile(0.5), hist.quantile(0.99)
        return cls(
            requests=round(hist.count),
            mean_ms=1000 * mean,
            p50=p50.scaled(1000) if p50 else None,
            p99=p99.scaled(1000) if p99 else None,
        )


class GaugeSample(BaseModel):
    """The engine's gauges at one moment of a point (`t_s`: seconds from its first sample)."""

    model_config = ConfigDict(frozen=True)

    t_s: float
    running: float | None
    waiting: float | None


class Occupancy(BaseModel):
    """A gauge over a point: its mean and its largest value (`samples`: how many readings; 0 = the simulator's
    exact time average)."""

    model_config = ConfigDict(frozen=True)

    mean: float
    max: float
    samples: int

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Occupancy | None:
        seen = [v for v in values if v is not None]
        return cls(mean=statistics.fmean(seen), max=max(seen), samples=len(seen)) if seen else None


class EngineTime(BaseModel):
    """A load point's TTFT split by the engine's own account (see the module docstring); every mean in ms."""

    model_config = ConfigDict(frozen=True)

    ttft: Interval | None = None
    queue: Interval | None = None
    prefill: Interval | None = None
    decode: Interval | None = None
    inference: Interval | None = None
    api_ms: float | None = None
    """vLLM's TTFT − queue − prefill (means): the API server's own part."""
    client_ttft_ms: float | None = None
    """The client's mean TTFT over the same requests (every one of the point with a first token)."""
    client_requests: int = 0
    http_ms: float | None = None
    """The client's TTFT − vLLM's (means): what happens outside vLLM's stamps."""
    iterations: int | None = None
    tokens_per_iteration: float | None = None
    preemptions: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    running: Occupancy | None = None
    waiting: Occupancy | None = None
    gauges: list[GaugeSample] = []
    notes: list[str] = []

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        if not self.prefix_cache_queries or self.prefix_cache_hits is None:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    def parts(self, client_scale: float = 1.0) -> dict[str, float | None]:
        """The client's mean TTFT by part (ms): queue, prefill, API server, HTTP. `client_scale`: the engine's
        seconds per client second (sim-serve's `--time-scale`; the engine's histograms are in its own time), so
        the HTTP part comes out in the engine's time too."""
        http = self.http_ms
        if client_scale != 1.0 and self.client_ttft_ms is not None and self.ttft is not None:
            http = self.client_ttft_ms * client_scale - self.ttft.mean_ms
        return {
            "queue_ms": self.queue.mean_ms if self.queue else None,
            "prefill_ms": self.prefill.mean_ms if self.prefill else None,
            "api_ms": self.api_ms,
            "http_ms": http,
        }

    def figures(self, client_scale: float = 1.0) -> dict[str, float]:
        """The parts as a tuning result's figures (`ttft_queue_ms`, ...; those the engine gave), in the engine's
        time (see `parts`)."""
        return {f"ttft_{k}": v for k, v in self.parts(client_scale).items() if v is not None}

    def lines(self) -> list[str]:
        """The split as a terminal shows it."""
        if self.ttft is None:
            return ["engine: no TTFT histogram in its /metrics (not vLLM?): TTFT not split", *self.notes]
        client = f"{self.client_ttft_ms:,.1f} ms" if self.client_ttft_ms is not None else "-"
        out = [
            f"engine's account of TTFT ({self.ttft.requests} requests, every phase): client mean {client} = "
            + " + ".join(f"{label} {_ms(v)}" for label, v in zip(PART_LABELS, self.parts().values(), strict=True))
        ]
        for name in ("ttft", "queue", "prefill", "decode"):
            got: Interval | None = getattr(self, name)
            if got is not None:
                out.append(
                    f"  vLLM {name:<8} mean {got.mean_ms:>9,.1f} ms  p50 {_q(got.p50)}  p99 {_q(got.p99)}"
                    f"  ({got.requests} requests)"
                )
        context = []
        if self.tokens_per_iteration is not None:
            context.append(f"{self.tokens_per_iteration:,.1f} tokens per iteration ({self.iterations:,} iterations)")
        if self.running is not None:
            context.append(f"running {self.running.mean:.1f} mean / {self.running.max:.0f} max")
        if self.waiting is not None:
            context.append(f"waiting {self.waiting.mean:.1f} mean / {self.waiting.max:.0f} max")
        if self.preemptions:
            context.append(f"{self.preemptions:,.0f} preemptions")
        if self.prefix_cache_hit_rate is not None:
            context.append(f"prefix-cache hits {self.prefix_cache_hit_rate:.1%}")
        if context:
            out.append("  " + "; ".join(context))
        return out + [f"  note: {n}" for n in self.notes]


PART_LABELS = ("queue", "prefill", "API server", "HTTP")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value if abs(value) >= 0.05 else 0.0:,.1f}"  # no "-0.0" for a rounding


def _q(q: Quantile | None) -> str:
    if q is None:
        return "-"
    high = "inf" if q.high == float("inf") else f"{q.high:,.0f}"
    return f"{q.value:,.1f} ms [{q.low:,.0f}-{high}]"


def finished_requests(before: MetricsSnapshot, after: MetricsSnapshot) -> float | None:
    """Requests the engine finished and accounted for between two scrapes (None: it keeps no such histogram)."""
    a, b = before.histogram(FINISHED), after.histogram(FINISHED)
    if a is None or b is None:
        return None
    got = b.minus(a)
    return got.count if got is not None else None


def engine_time(
    before: MetricsSnapshot,
    after: MetricsSnapshot,
    records: Sequence[RequestRecord],
    gauges: Sequence[GaugeSample] = (),
) -> EngineTime | None:
    """The split of the point between the two scrapes (see the module docstring); None when the engine exposes
    none of vLLM's request-interval histograms (llama.cpp, SGLang, a mock)."""
    intervals: dict[str, Interval | None] = {}
    notes: list[str] = []
    for key, name in HISTOGRAMS.items():
        a, b = before.histogram(name), after.histogram(name)
        got = b.minus(a) if a is not None and b is not None else None
        if b is not None and got is None:
            notes.append(f"{name} went back between the scrapes (the engine restarted): not read")
        intervals[key] = Interval.of(got) if got is not None else None
    if all(v is None for v in intervals.values()) and not any(before.histogram(n) for n in HISTOGRAMS.values()):
        return None
    ttft, queue, prefill = intervals["ttft"], intervals["queue"], intervals["prefill"]
    seen = [(r.chunk_ns[0] - r.sent_ns) / 1e6 for r in records if r.ok and r.chunk_ns]
    client = statistics.fmean(seen) if seen else None
    api = ttft.mean_ms - queue.mean_ms - prefill.mean_ms if ttft and queue and prefill else None
    if ttft and prefill and ttft.requests != prefill.requests:
        notes.append(
            f"vLLM timed {ttft.requests} first tokens and finished {prefill.requests} requests: the parts' means cover "
            "different requests (an aborted request has a TTFT, no queue or prefill time)"
        )
    if ttft and seen and ttft.requests != len(seen):
        notes.append(
            f"the client saw {len(seen)} first tokens, vLLM timed {ttft.requests}: requests other than this point's "
            "ran between the scrapes, or some were aborted"
        )
    iters = _iterations(before, after)
    d = delta(before, after)
    return EngineTime(
        **intervals,
        api_ms=api,
        client_ttft_ms=client,
        client_requests=len(seen),
        http_ms=client - ttft.mean_ms if client is not None and ttft else None,
        iterations=round(iters.count) if iters else None,
        tokens_per_iteration=iters.mean if iters else None,
        preemptions=d.num_preemptions,
        prefix_cache_queries=d.prefix_cache_queries,
        prefix_cache_hits=d.prefix_cache_hits,
        running=Occupancy.of([g.running for g in gauges]),
        waiting=Occupancy.of([g.waiting for g in gauges]),
        gauges=list(gauges),
        notes=notes,
    )


def _iterations(before: MetricsSnapshot, after: MetricsSnapshot) -> Histogram | None:
    a, b = before.histogram(ITERATION_TOKENS), after.histogram(ITERATION_TOKENS)
    got = b.minus(a) if a is not None and b is not None else None
    return got if got is not None and got.count > 0 else None
