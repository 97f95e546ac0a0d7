"""Writers for a run's records and summaries: per-request JSONL and CSV, and a flat summary row for CSV.

Per-request rows carry the derived latencies (ttft, tpot, e2el, max gap) beside the raw facts, so a file
can be analysed without servetune; the JSONL keeps the full timeline (`chunk_ns`). Every CSV servetune writes
passes its cells through `csv_safe`: a text cell starting with `=`, `+`, `-`, `@` (or a tab or carriage return)
would run as a spreadsheet formula (`=HYPERLINK(...)` as a variant name), so it gets a leading apostrophe.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from servetune.fileio import atomic_write_text
from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import Stat, Summary

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: object) -> object:
    """A CSV cell that no spreadsheet runs as a formula (numbers stay numbers)."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def _safe_row(row: dict) -> dict:
    return {k: csv_safe(v) for k, v in row.items()}


REQUEST_COLUMNS = (
    "index", "traffic_class", "phase", "conversation", "turn", "http_status", "error_class", "finish_reason",
    "prompt_tokens_expected", "prompt_tokens", "output_tokens_requested", "output_tokens", "output_tokens_source",
    "reasoning_tokens", "ttft_ms", "ttfc_ms", "tpot_ms", "e2el_ms", "max_itl_ms", "chunks", "lateness_ms",
)  # fmt: skip


def request_row(r: RequestRecord) -> dict:
    ttft = r.ttft_ns / 1e6 if r.ttft_ns is not None else None
    tpot, gap = r.tpot_ns, r.max_itl_ns
    return {
        **{k: getattr(r, k) for k in REQUEST_COLUMNS[:14]},
        "error_class": str(r.error_class) if r.error_class else None,
        "ttft_ms": ttft,
        "ttfc_ms": r.ttfc_ns / 1e6 if r.ttfc_ns is not None else None,
        "tpot_ms": tpot / 1e6 if tpot is not None else None,
        "e2el_ms": r.e2el_ns / 1e6,
        "max_itl_ms": gap / 1e6 if gap is not None else None,
        "chunks": len(r.chunk_ns),
        "lateness_ms": r.lateness_ns / 1e6,
    }


def write_jsonl(records: Iterable[RequestRecord], path: str | Path) -> None:
    atomic_write_text(Path(path), "".join(r.model_dump_json() + "\n" for r in records))


def write_rows_csv(path: str | Path, rows: Sequence[dict], fields: Sequence[str] | None = None) -> None:
    """The one CSV writer: every row's cells made safe for spreadsheets, the file written atomically; the columns
    are `fields`, or every key in the order the rows first use it."""
    if fields is None:
        fields = list(dict.fromkeys(k for row in rows for k in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields))
    writer.writeheader()
    writer.writerows(_safe_row(row) for row in rows)
    atomic_write_text(Path(path), out.getvalue())


def write_requests_csv(records: Iterable[RequestRecord], path: str | Path) -> None:
    write_rows_csv(path, [request_row(r) for r in records], REQUEST_COLUMNS)


def summary_row(summary: Summary, **context: object) -> dict:
    """One flat row: context columns first, then vLLM-named figures (mean/median/p90/p95/p99 per latency)."""
    row: dict = dict(context)
    for key in (
        "completed",
        "failed",
        "duration_s",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "goodput",
        "error_rate",
    ):
        row[key] = getattr(summary, key)
    for name in ("ttft", "ttfc", "tpot", "itl", "e2el"):
        stat: Stat = getattr(summary, f"{name}_ms")
        row[f"mean_{name}_ms"] = stat.mean
        for q, v in stat.percentiles.items():
            row[f"{'median' if q == 'p50' else q}_{name}_ms"] = v
    row["errors"] = json.dumps(summary.errors_by_class)
    row["valid"] = summary.validity.ok
    row["warnings"] = " | ".join(summary.validity.warnings)
    return row


def write_summary_csv(rows: Sequence[dict], path: str | Path) -> None:
    write_rows_csv(path, rows)
