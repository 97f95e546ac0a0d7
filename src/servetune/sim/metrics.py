"""`/metrics` of the simulated server, with vLLM v1's metric names, labels and bucket edges.

Written as Prometheus text by hand (a few gauges, counters and histograms) so that servetune's metrics
snapshots, deltas and prefix/preemption/speculation counters read the simulator exactly as they read vLLM.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from servetune.metrics.engine_time import HISTOGRAMS
from servetune.metrics.prometheus import MetricsSnapshot, Sample
from servetune.sim.scheduler import Scheduler

# vLLM's bucket edges (v1/metrics/loggers.py).
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
TOKEN_BUCKETS = (
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1000,
    2000,
    5000,
    10000,
    20000,
    50000,
    100000,
    200000,
    500000,
    1000000,
)


@dataclass
class Histogram:
    """Cumulative-bucket histogram as Prometheus exposes it."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def observe_repeated(self, value: float, times: int) -> None:
        """`observe(value)` `times` times (a stretch of equal decode steps)."""
        if times > 0:
            self.counts[bisect.bisect_left(self.buckets, value)] += times
            self.total += value * times
            self.n += times

    def observe_many(self, values: Sequence[float] | np.ndarray) -> None:
        """`observe` for each value, in one numpy pass (a finished request's inter-token gaps)."""
        if not len(values):
            return
        arr = np.asarray(values, dtype=float)
        bins = np.bincount(np.searchsorted(self.buckets, arr, side="left"), minlength=len(self.counts))
        self.counts = [a + b for a, b in zip(self.counts, bins.tolist(), strict=True)]
        self.total += float(arr.sum())
        self.n += int(arr.size)


@dataclass
class ServerStats:
    """Per-request figures the server observes (the scheduler keeps the token counters).

    The one rule of which figure feeds which histogram: `sim-serve` calls these methods as its tokens stream,
    the in-process backend (`sim/backend.py`) once per finished request, so their `/metrics` agree. The request's
    intervals are vLLM's (`vllm/v1/metrics/stats.py`): queue from the engine getting the request (after the API
    server) to its first scheduled step, prefill from there to its first token, decode from the first token to
    the last, inference from the first scheduled step to the last token; TTFT from the API server's arrival.
    """

    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    prefill: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    inference: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    iteration_tokens: Histogram = field(default_factory=lambda: Histogram(ITERATION_TOKEN_BUCKETS))
    prompt_len: Histogram = field(default_factory=lambda: Histogram(TOKEN_BUCKETS))
    gen_len: Histogram = field(default_factory=lambda: Histogram(TOKEN_BUCKETS))
    success: dict[str, int] = field(default_factory=dict)

    def first_token(self, ttft_s: float) -> None:
        """A request's first output, `ttft_s` after it reached the server."""
        self.ttft.observe(ttft_s)

    def token_gaps(self, gaps_s: Sequence[float] | np.ndarray) -> None:
        """Gaps between a request's consecutive output chunks."""
        self.itl.observe_many(gaps_s)

    def iteration(self, tokens: int, times: int = 1) -> None:
        """`times` engine steps that each delivered `tokens` tokens (vLLM's `iteration_tokens_total`: generated
        tokens, plus the computed prompt tokens of a request in the step that gives its first token)."""
        self.iteration_tokens.observe_repeated(tokens, times)

    def finished(
        self,
        reason: str,
        *,
        e2e_s: float,
        decode_s: float | None,
        tokens: int,
        queue_s: float | None,
        prompt_tokens: int,
        prefill_s: float | None = None,
    ) -> None:
        """A request ended normally: `decode_s` from its first output to its end, `queue_s` from the engine
        getting it to its first scheduled step, `prefill_s` from there to its first output (None: not known)."""
        self.e2e.observe(e2e_s)
        if decode_s is not None:
            self.decode.observe(decode_s)
            if tokens > 1:
                self.tpot.observe(decode_s / (tokens - 1))
        if queue_s is not None:
            self.queue.observe(queue_s)
        if prefill_s is not None:
            self.prefill.observe(prefill_s)
            if decode_s is not None:
                self.inference.observe(prefill_s + decode_s)
        self.prompt_len.observe(prompt_tokens)
        self.gen_len.observe(tokens)
        self.success[reason] = self.success.get(reason, 0) + 1


def _fmt(value: float) -> str:
    return repr(float(value))


INTERVALS = {
    "ttft": "Histogram of time to first token in seconds.",
    "queue": "Histogram of time spent in WAITING phase for request.",
    "inference": "Histogram of time spent in RUNNING phase for request.",
    "prefill": "Histogram of time spent in PREFILL phase for request.",
    "decode": "Histogram of time spent in DECODE phase for request.",
}
"""The request-interval histograms (`ServerStats` field → vLLM's help text; their names: `engine_time.HISTOGRAMS`)."""


def _hist_samples(h: Histogram) -> list[tuple[str, str | None, float]]:
    """A histogram's samples as Prometheus exposes them: (suffix, its `le` edge or None, value)."""
    out: list[tuple[str, str | None, float]] = []
    cum = 0
    for edge, count in zip(h.buckets, h.counts[:-1], strict=True):
        cum += count
        out.append(("_bucket", str(float(edge)), cum))
    return [*out, ("_bucket", "+Inf", h.n), ("_count", None, h.n), ("_sum", None, h.total)]


def interval_snapshot(stats: ServerStats, url: str, taken_s: float) -> MetricsSnapshot:
    """The request-interval histograms as a scrape of `render`'s text reads them, without the text: what the
    TTFT's split reads (`metrics.engine_time`), for a fit that replays hundreds of runs."""
    samples = [
        Sample(name=f"{HISTOGRAMS[key]}{suffix}", labels={"le": le} if le is not None else {}, value=float(value))
        for key in INTERVALS
        for suffix, le, value in _hist_samples(getattr(stats, key))
    ]
    return MetricsSnapshot(url=url, taken_s=taken_s, samples=samples)


def render(stats: ServerStats, scheduler: Scheduler, model_name: str) -> str:
    """The text `GET /metrics` returns."""
    lab = f'engine="0",model_name="{model_name}"'
    c = scheduler.counters
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[str, str, float]]) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {kind}")
        for suffix, extra, value in samples:
            labels = lab + (f",{extra}" if extra else "")
            lines.append(f"{name}{suffix}{{{labels}}} {_fmt(value)}")

    def hist(name: str, help_: str, h: Histogram) -> None:
        samples = [(suffix, f'le="{le}"' if le is not None else "", v) for suffix, le, v in _hist_samples(h)]
        metric(name, "histogram", help_, samples)

    metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [("", "", len(scheduler.running))],
    )
    metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [("", "", len(scheduler.waiting))],
    )
    metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [("", "", scheduler.pool.usage)],
    )
    counters = (
        ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions),
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens),
        ("vllm:generation_tokens", "Number of generation tokens processed.", c.generation_tokens),
        ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", c.prefix_queries),
        ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", c.prefix_hits),
    )
    for name, help_, value in counters:
        metric(name, "counter", help_, [("_total", "", value)])
    metric(
        "vllm:request_success",
        "counter",
        "Count of successfully processed requests.",
        [("_total", f'finished_reason="{r}"', n) for r, n in sorted(stats.success.items())]
        or [("_total", 'finished_reason="length"', 0)],
    )
    if scheduler.limits.num_speculative_tokens:
        metric(
            "vllm:spec_decode_num_drafts", "counter", "Number of spec decoding drafts.", [("_total", "", c.spec_drafts)]
        )
        metric(
            "vllm:spec_decode_num_draft_tokens",
            "counter",
            "Number of draft tokens.",
            [("_total", "", c.spec_draft_tokens)],
        )
        metric(
            "vllm:spec_decode_num_accepted_tokens",
            "counter",
            "Number of accepted tokens.",
            [("_total", "", c.spec_accepted_tokens)],
        )
        metric(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "counter",
            "Accepted tokens per draft position.",
            [("_total", f'position="{i}"', n) for i, n in enumerate(c.spec_accepted_per_pos)],
        )
    for key, help_ in INTERVALS.items():
        hist(HISTOGRAMS[key], help_, getattr(stats, key))
    hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", stats.itl)
    hist(
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        stats.tpot,
    )
    hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", stats.e2e)
    hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", stats.iteration_tokens)
    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", stats.prompt_len)
    hist("vllm:request_generation_tokens", "Number of generation tokens processed.", stats.gen_len)
    return "\n".join(lines) + "\n"
