"""A run's summary as readable text (plain lines; the CLI colours the warnings)."""

from __future__ import annotations

from servetune.metrics.summary import Stat, Summary


def _fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def summary_lines(s: Summary, title: str = "") -> list[str]:
    lines = [f"== {title} ==" if title else "== servetune bench =="]
    lines.append(
        f"completed {s.completed}  failed {s.failed}  duration {s.duration_s:.2f} s  "
        f"peak concurrency {s.peak_concurrency}"
    )
    lines.append(
        f"request/s {s.request_throughput:.3f}   output tok/s {s.output_throughput:,.1f}   "
        f"total tok/s {s.total_token_throughput:,.1f}"
    )
    lines.append(
        f"input tokens {s.input_tokens:,}  output tokens {s.output_tokens:,}  (reasoning {s.reasoning_tokens:,})"
    )
    if s.goodput is not None:
        lines.append(f"goodput {s.goodput:.3f} req/s ({s.good_requests} of {s.completed} met the SLOs)")
    keys = [k for k in s.ttft_ms.percentiles] or ["p50", "p90", "p95", "p99"]
    lines.append(f"{'ms':<6}{'mean':>10}" + "".join(f"{k:>10}" for k in keys) + f"{'max':>10}")
    for name in ("ttft", "ttfc", "tpot", "itl", "e2el"):
        stat: Stat = getattr(s, f"{name}_ms")
        if stat.count == 0:
            continue
        lines.append(
            f"{name:<6}{_fmt(stat.mean):>10}"
            + "".join(f"{_fmt(stat.percentiles.get(k)):>10}" for k in keys)
            + f"{_fmt(stat.max):>10}"
        )
    if s.errors_by_class:
        lines.append(
            "errors: "
            + ", ".join(f"{k} {v}" for k, v in s.errors_by_class.items())
            + f"  (error rate {100 * s.error_rate:.1f}%)"
        )
    v = s.validity
    lines.append(
        f"validity: output tokens {v.output_tokens_received:,}/{v.output_tokens_requested:,} requested, "
        f"{v.short_requests} short; client lateness p99 {v.lateness_p99_ms:.2f} ms; "
        f"warm-up excluded {v.warmup_excluded}"
    )
    if v.steady is not None:
        lines.append(v.steady.describe())
    if v.client is not None and v.client.processes:
        lag = max(v.client.processes, key=lambda p: p.loop_lag_p99_ms)
        busy = max(v.client.processes, key=lambda p: p.cpu_pct)
        lines.append(
            f"client: {v.client.workers} worker process{'es' if v.client.workers > 1 else ''} on {v.client.cores} "
            f"CPUs; event-loop lag p99 {lag.loop_lag_p99_ms:.2f} ms ({lag.role}); busiest {busy.role} "
            f"{busy.cpu_pct:.0f}% of a core"
        )
    if v.client is not None:
        lines.extend(f"clock: {line}" for line in v.client.clocks)
    lines.extend(f"WARNING: {w}" for w in v.warnings)
    return lines


SWEEP_HEADER = ("req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "failed")


def _sweep_cells(s: Summary) -> list[str]:
    from servetune.humanize import number

    values = (s.request_throughput, s.output_throughput, s.ttft_ms.p50, s.ttft_ms.p99, s.tpot_ms.p50)
    return ["-" if v is None else number(v, 3) for v in values] + [f"{s.failed:,}"]


def sweep_lines(points: list[tuple[float, Summary]], kind: str) -> list[str]:
    """A sweep as a table with a header and units, one row per level, its warnings under it."""
    level = "concurrency" if kind == "concurrency" else "req/s asked"
    widths = [max(len(level), 8)] + [max(len(h), 9) for h in SWEEP_HEADER]
    lines = ["  ".join(h.rjust(w) for h, w in zip([level, *SWEEP_HEADER], widths, strict=True))]
    for value, s in points:
        cells = [f"{value:g}", *_sweep_cells(s)]
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
        lines += [f"   WARNING: {w}" for w in s.validity.warnings]
    return lines
