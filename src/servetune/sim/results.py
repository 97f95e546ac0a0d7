"""Reading measured runs (servetune's per-request result files) for calibration and scoring.

A result directory holds one `<point>.jsonl` per load point: one `RequestRecord` JSON per request, as
`servetune bench --jsonl` writes them (the fidelity campaign's first records, with `warmup`, `end_ns` and `error`
in place of `phase`, `done_ns` and `error_class`, are read too), and `flags.txt` with the engine's vLLM flags one
per line. The load shape (closed or open loop, warm-up, seed) and the workload (its seed: servetune's synthetic
prompts are a function of seed and index, so equal keys share a prefix) come from `<point>.json` (`servetune bench
--json`) or `<point>.summary.json` (the device campaign's), else a closed loop at the records' `concurrency` field.
Warm-up requests are kept (a replay sends them, marked by phase); cool-down and failed ones are left out.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from servetune.errors import ServetuneError, from_validation_error
from servetune.load.shape import LoadShape
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
        raise from_validation_error(err, where="a result record is not a request record", fix=_FIX) from None


def measured_records(
    rows: list[dict[str, Any]], one_chunk_per_token: bool = True
) -> tuple[tuple[RequestRecord, ...], frozenset[int]]:
    """The successful requests in send order (warm-ups included, marked by phase), and the positions among the
    measured ones of those whose first-chunk time cannot be trusted (see `kept_records`)."""
    return kept_records([to_record(row) for row in rows], one_chunk_per_token)


def kept_records(
    records: Sequence[RequestRecord], one_chunk_per_token: bool = True
) -> tuple[tuple[RequestRecord, ...], frozenset[int]]:
    """The successful requests in send order (warm-ups included, marked by phase), and the positions among the
    measured ones of those whose first-chunk time cannot be trusted.

    With `one_chunk_per_token` (vLLM streams one chunk per token unless it speculates), a record with fewer
    chunks than output tokens lost some of them on the client, so its TTFT/TPOT are left out (its load is kept):
    the device campaign's first client skipped chunks whose text was empty (random weights emit ids the
    tokenizer cannot decode), see benchmarks/device/README.md. Without it (a client that counts every chunk, but
    a server that sends the last token's empty text with the closing chunk, benchmarks/device_campaign) only
    records without any chunk are left out.
    """
    kept = []
    for r in records:
        if r.phase == "cooldown" or not r.ok:
            continue
        if not r.done_ns or not (r.prompt_tokens or r.prompt_tokens_expected):
            raise ServetuneError(
                "a result record lacks its end time or prompt length",
                "give servetune's per-request records (sent_ns, chunk_ns, done_ns, prompt_tokens)",
            )
        kept.append(r)
    kept.sort(key=lambda r: r.sent_ns)
    measured = [r for r in kept if r.phase == "measure"]
    untimed = frozenset(
        i
        for i, r in enumerate(measured)
        if not r.chunk_ns or (one_chunk_per_token and len(r.chunk_ns) < r.output_tokens)
    )
    return tuple(kept), untimed


def read_flags(directory: Path) -> list[str]:
    """The engine's vLLM flags saved beside the results (`flags.txt`: one argv word per line)."""
    path = directory / "flags.txt"
    if not path.exists():
        return []
    words = path.read_text().splitlines()
    return words if len(words) > 1 else shlex.split(words[0]) if words else []


def point_files(directory: Path) -> list[Path]:
    """A result directory's per-request files, in the order they ran (their first send)."""
    files = sorted(p for p in directory.glob("*.jsonl"))
    if not files:
        raise ServetuneError(f"no per-request results (*.jsonl) in {directory}", "point at a result directory")
    return sorted(files, key=_first_send)


def measured_run(
    path: Path,
    deployment: SimDeployment,
    name: str | None = None,
    *,
    launch: str = "",
    one_chunk_per_token: bool | None = None,
) -> MeasuredRun:
    """One load point's measured run: its records, and the load shape and workload it was offered (from the side
    file: `<point>.json` as `servetune bench --json` writes it, or the campaign's `<point>.summary.json`; without
    one, a closed loop at the records' `concurrency`)."""
    rows = read_rows(path)
    return run_of(
        [to_record(row) for row in rows], _side(path), deployment, name or path.stem, path,
        launch=launch, one_chunk_per_token=one_chunk_per_token, rows=rows,
    )  # fmt: skip


def run_of(
    records: Sequence[RequestRecord],
    side: dict[str, Any],
    deployment: SimDeployment,
    name: str,
    where: Path,
    *,
    launch: str = "",
    one_chunk_per_token: bool | None = None,
    rows: list[dict[str, Any]] | None = None,
) -> MeasuredRun:
    """A measured run from its records and its description (`side`: `shape` and `workload` as `servetune bench`
    keeps them; `rows`, the raw records, for the campaign's closed loops described only by a `concurrency`
    field); `where` names it in errors."""
    per_token = not deployment.limits.num_speculative_tokens if one_chunk_per_token is None else one_chunk_per_token
    kept, untimed = kept_records(records, one_chunk_per_token=per_token)
    measured = [r for r in kept if r.phase == "measure"]
    if len(untimed) == len(measured):
        raise ServetuneError(f"{where} has no successful request with a complete stream", "re-run the load point")
    found = side.get("workload")
    workload: dict[str, Any] = found if isinstance(found, dict) else {}
    prefixes = {
        str(c["name"]): (int(c.get("shared_prefix_tokens") or 0), int(c.get("prefix_groups") or 1))
        for c in workload.get("classes") or []
        if isinstance(c, dict) and c.get("name")
    }
    seed = workload.get("seed") if workload.get("source") is None and isinstance(workload.get("seed"), int) else None
    rows = rows if rows is not None else [r.model_dump(include={"phase"}) for r in records]
    return MeasuredRun(
        name,
        _shape(rows, side, where, len(measured)),
        kept,
        deployment,
        untimed,
        launch=launch,
        seed=seed,
        prefixes=prefixes,
    )


def _first_send(path: Path) -> int:
    """The first send time in a result file (the client's monotonic clock: comparable within one launch)."""
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("sent_ns"), int):
            return int(row["sent_ns"])
    return 0


def _side(path: Path) -> dict[str, Any]:
    """The summary written beside a result file (`<point>.summary.json` or `<point>.json`), or {}."""
    for side in (path.with_name(path.stem + ".summary.json"), path.with_suffix(".json")):
        if not side.is_file():
            continue
        try:
            data = json.loads(side.read_text())
        except (OSError, ValueError):
            raise ServetuneError(f"{side} is not JSON", "give the summary that bench --json wrote") from None
        if isinstance(data, dict):
            return data
    return {}


def _shape(rows: list[dict[str, Any]], side: dict[str, Any], path: Path, measured: int) -> LoadShape:
    """The load shape of a run: the side file's (closed or open loop, with its warm-up and seed), else a closed
    loop at the records' `concurrency` field or the side file's `concurrency`."""
    shape = side.get("shape")
    if isinstance(shape, dict) and shape.get("kind") in ("concurrency", "rate"):
        data = dict(shape)
        if data["kind"] == "rate" and data.get("rate") is None:
            data["rate"] = math.inf  # all at once, as LoadResult JSON writes infinity
        data.setdefault("requests", measured)
        try:
            return LoadShape.model_validate(data)
        except ValidationError as err:
            raise from_validation_error(err, where=f"{path}: the side file's load shape", fix=_FIX) from None
        except ServetuneError as err:
            raise ServetuneError(f"{path}: the side file's load shape is not one: {err}", _FIX) from None
    found: Any = next((r["concurrency"] for r in rows if r.get("concurrency")), None) or side.get("concurrency")
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise ServetuneError(
            f"{path}: no load shape in {path.stem}.summary.json or {path.stem}.json, and no closed-loop concurrency "
            "in the records",
            "write bench's --json beside its --jsonl (same name), or a `concurrency` field in the records",
        )
    warmup = sum(1 for r in rows if r.get("warmup") or r.get("phase") == "warmup")
    return LoadShape.closed(found, requests=measured, warmup_requests=warmup)
