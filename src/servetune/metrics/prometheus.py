"""An engine's Prometheus `/metrics`: snapshots, and the delta between two of them with named figures.

The text is parsed with prometheus_client's parser. Engines rename their metrics across versions, so every
named figure accepts all the names it has had: vLLM's V1 names (`vllm:prefix_cache_hits_total`,
`vllm:kv_cache_usage_perc`), the deprecated ones (`vllm:gpu_prefix_cache_hits_total`,
`vllm:gpu_cache_usage_perc`, hidden since 0.11), and SGLang's / llama.cpp's equivalents where they exist.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable

from pydantic import BaseModel, ConfigDict

from servetune.control.client import ControlClient
from servetune.errors import ServetuneError
from servetune.metrics.histogram import Histogram

# Each figure: the names it has had, newest first. Counters are listed with prometheus_client's `_total`.
NAMES: dict[str, tuple[str, ...]] = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": (
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
        "sglang:cached_tokens_total",
        "llamacpp:prompt_tokens_cached_total",
    ),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    "num_preemptions": ("vllm:num_preemptions_total", "vllm:num_preemption_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    "requests_finished": ("vllm:request_success_total",),
    "kv_cache_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "num_requests_running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "num_requests_waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
}


class Sample(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    labels: dict[str, str]
    value: float


class MetricsSnapshot(BaseModel):
    """Every sample of one scrape, with the local monotonic time it was taken."""

    model_config = ConfigDict(frozen=True)

    url: str
    taken_s: float
    samples: list[Sample]

    def values(self, name: str, **labels: str) -> list[float]:
        return [
            s.value for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def get(self, figure: str) -> float | None:
        """A named figure (see NAMES), summed over label sets (engines, models), under its first present name."""
        for name in NAMES.get(figure, (figure,)):
            found = self.values(name)
            if found:
                return float(sum(found))
        return None

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def histogram(self, name: str) -> Histogram | None:
        """The histogram `name` (its `_bucket`, `_count` and `_sum` samples), summed over label sets (engines,
        models) bucket by bucket; None when the engine does not expose it."""
        buckets: dict[float, float] = {}
        for s in self.samples:
            if s.name == name + "_bucket" and "le" in s.labels:
                edge = float(s.labels["le"])
                buckets[edge] = buckets.get(edge, 0.0) + s.value
        counts = self.values(name + "_count")
        if not buckets or not counts:
            return None
        edges = tuple(sorted(e for e in buckets if math.isfinite(e)))
        return Histogram(
            edges=edges,
            cumulative=tuple(buckets[e] for e in edges),
            count=float(sum(counts)),
            sum=float(sum(self.values(name + "_sum"))),
        )


class MetricsDelta(BaseModel):
    """What an engine's counters say happened between two snapshots (None: the engine does not expose it)."""

    model_config = ConfigDict(frozen=True)

    duration_s: float
    prefix_cache_queries: float | None
    prefix_cache_hits: float | None
    spec_drafts: float | None
    spec_draft_tokens: float | None
    spec_accepted_tokens: float | None
    num_preemptions: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    requests_finished: float | None
    kv_cache_usage_before: float | None
    kv_cache_usage_after: float | None
    counters: dict[str, float]

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Hit tokens / queried tokens of the prefix cache over the interval."""
        if not self.prefix_cache_queries or self.prefix_cache_hits is None:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    @property
    def spec_acceptance_rate(self) -> float | None:
        """Accepted draft tokens / proposed draft tokens (vLLM's 'draft acceptance rate')."""
        if not self.spec_draft_tokens or self.spec_accepted_tokens is None:
            return None
        return self.spec_accepted_tokens / self.spec_draft_tokens

    @property
    def spec_mean_acceptance_length(self) -> float | None:
        """Tokens produced per draft step: 1 + accepted / drafts (vLLM's 'mean acceptance length')."""
        if not self.spec_drafts or self.spec_accepted_tokens is None:
            return None
        return 1.0 + self.spec_accepted_tokens / self.spec_drafts

    @property
    def kv_cache_usage(self) -> float | None:
        return self.kv_cache_usage_after


def parse(text: str, url: str = "", taken_s: float | None = None) -> MetricsSnapshot:
    """A snapshot from `/metrics` text (Prometheus exposition format)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.append(Sample(name=s.name, labels=dict(s.labels), value=float(s.value)))
    except ValueError as err:
        raise ServetuneError(
            f"{url or 'the metrics text'} is not Prometheus text: {err}", "point at the engine's /metrics endpoint"
        ) from err
    return MetricsSnapshot(url=url, taken_s=time.monotonic() if taken_s is None else taken_s, samples=samples)


async def scrape(client: ControlClient) -> MetricsSnapshot:
    """Reads the engine's `/metrics` now, through the control-plane client (its timeouts apply)."""
    return parse(await client.metrics_text(), client.base_url + "/metrics")


def parse_only(text: str, names: Iterable[str], url: str = "", taken_s: float | None = None) -> MetricsSnapshot:
    """A snapshot of the samples of `names` only: the other lines are dropped unparsed. vLLM's `/metrics` is
    mostly histograms; reading two gauges this way costs a fraction of a millisecond, so it can run beside a load
    on the client's own event loop without delaying the time stamps it takes."""
    wanted = tuple(f"{name}{end}" for name in names for end in ("{", " "))
    kept = [line for line in text.splitlines() if line.startswith(wanted)]
    return parse("\n".join(kept) + "\n", url, taken_s)


SETTLE_S = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Waits before scraping an engine again when its counters fall short of what the client saw: an engine updates
them just after it sends a request's last bytes (vLLM from its output loop, llama.cpp as it frees the slot), so a
scrape at once can miss the last requests."""


async def settle(
    scrape_again: Callable[[], Awaitable[MetricsSnapshot | None]],
    after: MetricsSnapshot,
    short: Callable[[MetricsSnapshot], bool],
) -> MetricsSnapshot:
    """`after`, scraped again after each of `SETTLE_S` while `short(snapshot)` says the engine has not yet counted
    everything the client saw (1.55 s at most); the last snapshot read."""
    for wait in SETTLE_S:
        if not short(after):
            break
        await asyncio.sleep(wait)
        again = await scrape_again()
        if again is None:
            break
        after = again
    return after


def _counters(snap: MetricsSnapshot) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in snap.samples:
        if s.name.endswith("_total"):
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def delta(before: MetricsSnapshot, after: MetricsSnapshot) -> MetricsDelta:
    """Counter increases from `before` to `after` (a counter reset, e.g. an engine restart, gives None)."""

    def diff(figure: str) -> float | None:
        a, b = before.get(figure), after.get(figure)
        if a is None or b is None or b < a:
            return None
        return b - a

    cb, ca = _counters(before), _counters(after)
    return MetricsDelta(
        duration_s=after.taken_s - before.taken_s,
        prefix_cache_queries=diff("prefix_cache_queries"),
        prefix_cache_hits=diff("prefix_cache_hits"),
        spec_drafts=diff("spec_drafts"),
        spec_draft_tokens=diff("spec_draft_tokens"),
        spec_accepted_tokens=diff("spec_accepted_tokens"),
        num_preemptions=diff("num_preemptions"),
        prompt_tokens=diff("prompt_tokens"),
        generation_tokens=diff("generation_tokens"),
        requests_finished=diff("requests_finished"),
        kv_cache_usage_before=before.get("kv_cache_usage"),
        kv_cache_usage_after=after.get("kv_cache_usage"),
        counters={k: ca[k] - cb.get(k, 0.0) for k in sorted(ca) if ca[k] >= cb.get(k, 0.0)},
    )


def missing(snapshot: MetricsSnapshot, figures: Iterable[str] = NAMES) -> list[str]:
    """Named figures this engine does not expose (for a note in reports)."""
    return [f for f in figures if snapshot.get(f) is None]
