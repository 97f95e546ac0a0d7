"""Reading measured runs (servetune's per-request result files) for calibration and scoring.

A result directory holds one `<point>.jsonl` per load point: one `RequestRecord` JSON per request, as
`servetune bench --jsonl` writes them (the fidelity campaign's first records, with `warmup`, `end_ns` and `error`
in place of `phase`, `done_ns` and `error_class`, are read too), and `flags.txt` with the engine's vLLM flags one
per line. The closed-loop concurrency comes from the records (a `concurrency` field), else from
`<point>.summary.json` (the campaign's) or `<point>.json` (`servetune bench --json`: `shape.concurrency`).
Warm-up, cool-down and failed requests are left out.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servetune.errors import ServetuneError
from servetune.metrics.record import ErrorClass, RequestRecord
from servetune.sim.calibration import MeasuredRun
from servetune.sim.deployment import SimDeployment

_FIX = "give servetune's per-request JSONL files (`servetune bench --jsonl`)"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, with a clear error for a broken line."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ServetuneError(f"{path} cannot be read as text: {err}", _FIX) from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ServetuneError(f"{path}:{n} is not JSON ({err})", _FIX) from None
        if not isinstance(row, dict):
            raise ServetuneError(f"{path}:{n} is not a JSON object", _FIX)
        out.append(row)
    return out


def to_record(row: dict[str, Any]) -> RequestRecord:
    """A `RequestRecord` from a result row (the campaign's older field names mapped; other extra fields, such
    as its `concurrency`, ignored)."""
    data = {k: v for k, v in row.items() if k in RequestRecord.model_fields}
    if row.get("warmup"):
        data["phase"] = "warmup"
    if not data.get("done_ns") and row.get("end_ns"):
        data["done_ns"] = row["end_ns"]
    if row.get("error") and not data.get("error_class"):
        data["error_class"], data["error"] = ErrorClass.ERROR_EVENT, str(row["error"])
    if data.get("output_tokens_requested") is None and row.get("max_tokens"):
        data["output_tokens_requested"] = row["max_tokens"]
    try:
        return RequestRecord.model_validate(data)
    except ValidationError as err:
        raise ServetuneError(f"a result record is not a request record: {err.errors()[0]['msg']}", _FIX) from None


def measured_records(
    rows: list[dict[str, Any]], one_chunk_per_token: bool = True
) -> tuple[tuple[RequestRecord, ...], frozenset[int]]:
    """The successful measured requests in send order, and the positions of those whose first-chunk time cannot
    be trusted.

    With `one_chunk_per_token` (vLLM streams one chunk per token unless it speculates), a record with fewer
    chunks than output tokens lost some of them on the client, so its TTFT/TPOT are left out (its load is kept):
    the device campaign's first client skipped chunks whose text was empty (random weights emit ids the
    tokenizer cannot decode), see benchmarks/device/README.md.
    """
    records = []
    for row in rows:
        r = to_record(row)
        if r.phase != "measure" or not r.ok:
            continue
        if not r.done_ns or not (r.prompt_tokens or r.prompt_tokens_expected):
            raise ServetuneError(
                "a result record lacks its end time or prompt length",
                "give servetune's per-request records (sent_ns, chunk_ns, done_ns, prompt_tokens)",
            )
        records.append(r)
    records.sort(key=lambda r: r.sent_ns)
    untimed = frozenset(
        i
        for i, r in enumerate(records)
        if not r.chunk_ns or (one_chunk_per_token and len(r.chunk_ns) < r.output_tokens)
    )
    return tuple(records), untimed


def read_flags(directory: Path) -> list[str]:
    """The engine's vLLM flags saved beside the results (`flags.txt`: one argv word per line)."""
    path = directory / "flags.txt"
    if not path.exists():
        return []
    words = path.read_text().splitlines()
    return words if len(words) > 1 else shlex.split(words[0]) if words else []


def point_files(directory: Path) -> list[Path]:
    files = sorted(p for p in directory.glob("*.jsonl"))
    if not files:
        raise ServetuneError(f"no per-request results (*.jsonl) in {directory}", "point at a result directory")
    return files


def measured_run(path: Path, deployment: SimDeployment, name: str | None = None) -> MeasuredRun:
    """One load point's measured run (closed loop at the run's concurrency)."""
    rows = read_rows(path)
    records, untimed = measured_records(rows, one_chunk_per_token=not deployment.limits.num_speculative_tokens)
    if len(untimed) == len(records):
        raise ServetuneError(f"{path} has no successful request with a complete stream", "re-run the load point")
    return MeasuredRun(name or path.stem, _concurrency(rows, path), records, deployment, untimed)


def _concurrency(rows: list[dict[str, Any]], path: Path) -> int:
    """The closed-loop concurrency of a run: in its records, or in the summary written beside them."""
    found: Any = next((r["concurrency"] for r in rows if r.get("concurrency")), None)
    for side in (path.with_name(path.stem + ".summary.json"), path.with_suffix(".json")):
        if found is not None or not side.is_file():
            continue
        try:
            data = json.loads(side.read_text())
        except (OSError, ValueError):
            raise ServetuneError(f"{side} is not JSON", "give the summary that bench --json wrote") from None
        shape = data.get("shape") if isinstance(data, dict) else None
        if isinstance(shape, dict) and shape.get("kind") == "rate":
            raise ServetuneError(
                f"{side}: the run was open loop (rate {shape.get('rate')}/s)",
                "calibrate on closed-loop runs (bench --concurrency N)",
            )
        found = data.get("concurrency") or (shape or {}).get("concurrency") if isinstance(data, dict) else None
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise ServetuneError(
            f"{path}: no closed-loop concurrency in the records, {path.stem}.summary.json or {path.stem}.json",
            "write bench's --json beside its --jsonl (same name), or a `concurrency` field in the records",
        )
    return found
