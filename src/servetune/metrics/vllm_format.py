"""vLLM `bench serve`'s result JSON, both ways: the one owner of its keys, units and formulas.

Writing (`vllm_result`): a servetune run as the flat object `vllm bench serve --save-result` writes — `duration`,
`completed`, `request_throughput`, `output_throughput`, `mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms`,
`request_goodput`, `max_output_tokens_per_s`, `max_concurrent_requests`, and with `--save-detailed` the
per-request lists in seconds (`ttfts`, `itls`, `latencies`, `start_times`, `input_lens`, `output_lens`,
`errors`, `generated_texts`) — so scripts and vLLM's own readers (`vllm bench sweep plot`, `plot_pareto`,
the timeline plot) take servetune's file unchanged. The figures come from servetune's `Summary`, whose
definitions are vLLM's (docs/metrics.md); the two formulas vLLM computes apart (peak output tokens per second and
peak requests in one-second buckets) are written here the way vLLM computes them.

Reading (`records_from_vllm`, `figures_of`): a vLLM result file back into servetune's `RequestRecord`s (when it
holds the per-request lists) and its flat figures, so `servetune report` compares runs of both tools.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from servetune.metrics.latency import PERCENTILE_METRICS
from servetune.metrics.record import ErrorClass, RequestRecord
from servetune.metrics.summary import Stat, Summary

DETAILED_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors")
"""The per-request lists vLLM keeps only with `--save-detailed` (`latencies` and `queue_times` stay without it)."""


def percentile_word(p: float) -> str:
    """vLLM's key spelling of a percentile: 99 → `99`, 99.9 → `99.9`."""
    return str(int(p)) if int(p) == p else str(p)


def result_filename(label: str, request_rate: float, max_concurrency: int | None, model_id: str, date: str) -> str:
    """vLLM's default result file name: `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json`."""
    concurrency = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
    return f"{label}-{request_rate}qps{concurrency}-{model_id.split('/')[-1]}-{date}.json"


def _ms(stat: Stat, key: str) -> float:
    value = getattr(stat, key) if key != "median" else stat.p50
    return 0.0 if value is None else float(value)  # vLLM writes 0 for an empty list (np.mean(x or 0))


def figures_of(
    summary: Summary, metrics: Iterable[str] = PERCENTILE_METRICS, percentiles: Iterable[float] | None = None
) -> dict[str, float]:
    """A summary's figures under vLLM's flat names (what a result file holds besides its settings and lists); the
    `pNN_` keys of `percentiles` only (vLLM's `--metric-percentiles`), or of every percentile the summary has."""
    wanted = None if percentiles is None else {f"p{float(p):g}" for p in percentiles}
    out: dict[str, float] = {
        "duration": summary.duration_s,
        "completed": summary.completed,
        "failed": summary.failed,
        "total_input_tokens": summary.input_tokens,
        "total_output_tokens": summary.output_tokens,
        "request_throughput": summary.request_throughput,
        "output_throughput": summary.output_throughput,
        "total_token_throughput": summary.total_token_throughput,
    }
    if summary.goodput is not None:
        out["request_goodput"] = summary.goodput
    for name in metrics:
        stat: Stat = getattr(summary, f"{name}_ms")
        out[f"mean_{name}_ms"] = _ms(stat, "mean")
        out[f"median_{name}_ms"] = _ms(stat, "median")
        out[f"std_{name}_ms"] = _ms(stat, "std")
        for key, value in stat.percentiles.items():
            if wanted is None or key in wanted:
                out[f"p{percentile_word(float(key[1:]))}_{name}_ms"] = value
    return out


def peaks(records: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's `max_output_tokens_per_s` and `max_concurrent_requests`: over one-second buckets from the first send
    of a completed request, the most output chunks received in a bucket and the most requests active in one."""
    ok = [r for r in records if r.ok]
    if not ok:
        return 0.0, 0
    t0 = min(r.sent_ns for r in ok)
    buckets = math.ceil(max(r.done_ns - t0 for r in ok) / 1e9) + 1
    tokens = np.zeros(buckets)
    active = np.zeros(buckets)
    for r in ok:
        for t in r.chunk_ns:
            b = int((t - t0) // 1_000_000_000)
            if 0 <= b < buckets:
                tokens[b] += 1
        first, last = int((r.sent_ns - t0) // 1_000_000_000), int((r.done_ns - t0) // 1_000_000_000)
        active[first : last + 1] += 1
    return float(tokens.max()), int(active.max())


def vllm_result(
    summary: Summary,
    records: Sequence[RequestRecord],
    *,
    settings: Mapping[str, Any],
    metrics: Iterable[str] = PERCENTILE_METRICS,
    percentiles: Iterable[float] | None = None,
    detailed: bool = False,
) -> dict[str, Any]:
    """The run as `vllm bench serve` writes it. `settings`: the keys vLLM writes first (date, backend, label,
    model_id, tokenizer_id, num_prompts, request_rate, burstiness, max_concurrency and any --metadata)."""
    measured = [r for r in records if r.phase == "measure"]
    out: dict[str, Any] = {"endpoint_type": settings.get("backend"), **settings}
    figures = figures_of(summary, metrics, percentiles)
    out.update({k: v for k, v in figures.items() if not k.endswith("_ms")})
    out["request_goodput"] = summary.goodput  # null without --goodput, as vLLM writes it
    out["latencies"] = [r.e2el_ns / 1e9 if r.ok else 0.0 for r in measured]
    out["queue_times"] = [max(0, r.sent_ns - r.scheduled_ns) / 1e9 for r in measured]
    if detailed:
        out["input_lens"] = [r.prompt_tokens or r.prompt_tokens_expected or 0 for r in measured]
        out["output_lens"] = [r.output_tokens if r.ok else 0 for r in measured]
        out["ttfts"] = [(r.ttft_ns or 0) / 1e9 if r.ok else 0.0 for r in measured]
        out["itls"] = [[float(g) / 1e9 for g in np.diff(r.chunk_ns)] if r.ok else [] for r in measured]
        out["start_times"] = [r.sent_ns / 1e9 for r in measured]
        out["generated_texts"] = [r.output_text or "" for r in measured]
        out["errors"] = ["" if r.ok else f"{r.error_class}: {r.error or ''}" for r in measured]
    out["max_output_tokens_per_s"], out["max_concurrent_requests"] = peaks(measured)
    out["rtfx"] = 0.0
    out.update({k: v for k, v in figures.items() if k.endswith("_ms")})
    return out


def figures_from_file(data: Mapping[str, Any]) -> dict[str, float]:
    """The numeric figures of a vLLM result object (its flat numbers; lists and settings left out)."""
    out: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        out[key] = float(value)
    return out


def _error_class(text: str) -> ErrorClass:
    """A vLLM error string (an HTTP reason or a Python traceback) as servetune's nearest class."""
    low = text.lower()
    for words, klass in (
        (("too many requests",), ErrorClass.HTTP_429),
        (("timeout",), ErrorClass.FIRST_TOKEN_TIMEOUT),
        (("cannot connect", "connection refused", "connect call failed"), ErrorClass.CONNECT_ERROR),
        (("reset", "disconnected", "payload"), ErrorClass.CONNECTION_RESET),
        (("never received a valid chunk",), ErrorClass.TRUNCATED),
        (("bad request", "not found", "unprocessable", "unauthorized", "forbidden"), ErrorClass.HTTP_4XX),
    ):
        if any(w in low for w in words):
            return klass
    return ErrorClass.HTTP_5XX


def records_from_vllm(data: Mapping[str, Any]) -> list[RequestRecord] | None:
    """Per-request records rebuilt from a `--save-detailed` result (None without its lists): each chunk's time is
    the start plus the TTFT plus the running sum of the ITLs, exactly vLLM's own reading of them."""
    starts, ttfts, itls = data.get("start_times"), data.get("ttfts"), data.get("itls")
    latencies = data.get("latencies")
    if not (isinstance(starts, list) and isinstance(ttfts, list) and isinstance(itls, list) and latencies):
        return None
    inputs = data.get("input_lens") or [None] * len(starts)
    outputs = data.get("output_lens") or [0] * len(starts)
    errors = data.get("errors") or [""] * len(starts)
    records = []
    for i, (start, ttft, gaps, latency) in enumerate(zip(starts, ttfts, itls, latencies, strict=False)):
        sent = round(float(start) * 1e9)
        failed = bool(errors[i]) if i < len(errors) else False
        chunks: list[int] = []
        if not failed:
            t = float(start) + float(ttft)
            chunks.append(round(t * 1e9))
            for gap in gaps:
                t += float(gap)
                chunks.append(round(t * 1e9))
        records.append(
            RequestRecord(
                index=i,
                sent_ns=sent,
                scheduled_ns=sent,
                dispatched_ns=sent,
                done_ns=sent + round(float(latency) * 1e9) if not failed else sent,
                chunk_ns=chunks,
                prompt_tokens=inputs[i] if i < len(inputs) else None,
                prompt_tokens_expected=inputs[i] if i < len(inputs) else None,
                output_tokens=int(outputs[i]) if i < len(outputs) and outputs[i] else 0,
                output_tokens_source="usage",
                error_class=_error_class(str(errors[i])) if failed else None,
                error=str(errors[i])[:500] if failed else None,
            )
        )
    return records
