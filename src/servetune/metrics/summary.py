"""Summaries with vLLM's definitions (published in docs/metrics.md).

Over the measured (non-warm-up, non-cool-down) records of a run:
- ttft = first output chunk − send; ttfc (time to first content) = first non-reasoning chunk − send;
- tpot = (e2el − ttft) / (n − 1) per request with n ≥ 2 output tokens (n from usage, else the tokenizer);
- itl = every gap between consecutive output chunks, pooled over requests;
- e2el = end of the response − send;
- duration = last end − first send of the measured requests; request/s = completed / duration;
  output tok/s = Σ output tokens of completed requests / duration; total tok/s adds their prompt tokens;
- goodput = completed requests that meet every given SLO / duration.
Latency figures use completed requests only; failures are counted by class beside them, never averaged in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from servetune.metrics.record import RequestRecord
from servetune.metrics.slo import LATENCY_SLO_KEY, Slos, slo_miss
from servetune.metrics.validity import ClientReport, Validity, check_validity


class Stat(BaseModel):
    """A distribution in milliseconds (or the unit its name says)."""

    model_config = ConfigDict(frozen=True)

    count: int = 0
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    percentiles: dict[str, float] = {}

    @property
    def median(self) -> float | None:
        return self.p50

    def p(self, q: float) -> float | None:
        """Any requested percentile, e.g. `stat.p(99.9)`."""
        return self.percentiles.get(_key(q))

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray, percentiles: Iterable[float] = (50, 90, 95, 99)) -> Stat:
        arr = np.asarray(values, dtype=float)
        if arr.size == 0:
            return cls()
        qs = sorted(set(percentiles) | {50, 90, 95, 99})
        got = np.percentile(arr, qs)
        table = {_key(q): float(v) for q, v in zip(qs, got, strict=True)}
        return cls(
            count=int(arr.size),
            mean=float(arr.mean()),
            std=float(arr.std()),
            min=float(arr.min()),
            max=float(arr.max()),
            p50=table["p50"],
            p90=table["p90"],
            p95=table["p95"],
            p99=table["p99"],
            percentiles=table,
        )


def _key(q: float) -> str:
    return f"p{q:g}"


class Summary(BaseModel):
    """vLLM-named figures of one run, with its validity."""

    model_config = ConfigDict(frozen=True)

    completed: int
    failed: int
    duration_s: float
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    ttft_ms: Stat
    ttfc_ms: Stat
    tpot_ms: Stat
    itl_ms: Stat
    e2el_ms: Stat
    output_tokens_per_request: Stat
    goodput: float | None
    good_requests: int | None
    slos: Slos | None
    errors_by_class: dict[str, int]
    error_rate: float
    peak_concurrency: int
    validity: Validity

    def slo_failures(self, slos: Mapping[str, float]) -> list[str]:
        """Which of an experiment's run-level SLOs this run misses (latency percentiles, error rate), each judged
        by `slo.slo_miss`."""
        out = []
        for key, bound in slos.items():
            value: float | None = None
            if m := LATENCY_SLO_KEY.match(key):
                stat: Stat = getattr(self, f"{m.group(1)}_ms")
                value = stat.p(float(m.group(2)))
            elif key == "error_rate":
                value = self.error_rate
            if value is not None and (miss := slo_miss(key, value, bound)) is not None:
                out.append(miss)
        return out


def summarize(
    records: Sequence[RequestRecord],
    *,
    slos: Slos | None = None,
    percentiles: Iterable[float] = (50, 90, 95, 99),
    client: ClientReport | None = None,
) -> Summary:
    """The summary of a run's measured records (warm-up and cool-down records are left out here); `client`: the
    load generator's own evidence, for the validity verdict."""
    pct = tuple(percentiles)
    measured = [r for r in records if r.phase == "measure"]
    ok = [r for r in measured if r.ok]
    failed = len(measured) - len(ok)
    if measured:
        start = min(r.sent_ns for r in measured)
        end = max(r.done_ns for r in measured)
        duration = max((end - start) / 1e9, 1e-9)
    else:
        duration = 0.0
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum((r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_expected or 0) for r in ok)
    streamed = [r for r in ok if r.stream and r.chunk_ns]
    ttft = [(r.chunk_ns[0] - r.sent_ns) / 1e6 for r in streamed]
    ttfc = [(r.first_content_ns - r.sent_ns) / 1e6 for r in streamed if r.first_content_ns is not None]
    tpot = [t / 1e6 for r in streamed if (t := r.tpot_ns) is not None]
    gaps = [np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) for r in streamed if len(r.chunk_ns) > 1]
    itl = np.concatenate(gaps) / 1e6 if gaps else np.empty(0)
    e2el = [(r.done_ns - r.sent_ns) / 1e6 for r in ok]
    good = None
    goodput = None
    if slos is not None:
        good = sum(1 for r in ok if slos.met_by(r))
        goodput = good / duration if duration else 0.0
    errors = Counter(str(r.error_class) for r in measured if r.error_class is not None)
    return Summary(
        completed=len(ok),
        failed=failed,
        duration_s=duration,
        request_throughput=len(ok) / duration if duration else 0.0,
        output_throughput=out_tokens / duration if duration else 0.0,
        total_token_throughput=(out_tokens + in_tokens) / duration if duration else 0.0,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        reasoning_tokens=sum(r.reasoning_tokens for r in ok),
        ttft_ms=Stat.of(ttft, pct),
        ttfc_ms=Stat.of(ttfc, pct),
        tpot_ms=Stat.of(tpot, pct),
        itl_ms=Stat.of(itl, pct),
        e2el_ms=Stat.of(e2el, pct),
        output_tokens_per_request=Stat.of([r.output_tokens for r in ok], pct),
        goodput=goodput,
        good_requests=good,
        slos=slos,
        errors_by_class=dict(sorted(errors.items())),
        error_rate=failed / len(measured) if measured else 0.0,
        peak_concurrency=_peak_concurrency(measured),
        validity=check_validity(records, client),
    )


def _peak_concurrency(records: Sequence[RequestRecord]) -> int:
    """The most requests in flight at once (a sweep over send/done events)."""
    events = sorted([(r.sent_ns, 1) for r in records] + [(r.done_ns, -1) for r in records], key=lambda e: (e[0], e[1]))
    peak = cur = 0
    for _, step in events:
        cur += step
        peak = max(peak, cur)
    return peak
