"""Reading measured runs (servetune's per-request result files) for calibration and scoring.

A result directory holds one `<point>.jsonl` per load point (one JSON record per request: prompt and
output token counts, `sent_ns`, `chunk_ns` (each streamed chunk), `end_ns`, `warmup`, `concurrency`,
`error`), an optional `<point>.summary.json`, and `flags.txt` with the engine's vLLM flags one per line
(as the fidelity campaign writes them). Warm-up and failed requests are left out.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from servetune.errors import ServetuneError
from servetune.sim.calibration import MeasuredRequest, MeasuredRun
from servetune.sim.deployment import SimDeployment


def read_records(path: Path) -> list[dict]:
    """The JSON records of a JSONL file, with a clear error for a broken line."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ServetuneError(
                f"{path}:{n} is not JSON ({err})", "give servetune's per-request JSONL files"
            ) from None
    return out


def measured_requests(records: list[dict], one_chunk_per_token: bool = True) -> list[MeasuredRequest]:
    """Successful measured requests, in send order, times in seconds.

    Reads both the load room's `RequestRecord` (`phase`, `done_ns`, `error_class`) and the fidelity
    campaign's records (`warmup`, `end_ns`, `error`). With `one_chunk_per_token` (vLLM streams one
    chunk per token unless it speculates), a record with fewer chunks than output tokens lost some of
    them on the client, so its first-chunk time is not trusted (its TTFT is left out, its load is kept):
    the device campaign's first client skipped chunks whose text was empty (random weights emit ids the
    tokenizer cannot decode), see benchmarks/device/README.md.
    """
    out = []
    for r in records:
        if r.get("warmup") or r.get("phase", "measure") != "measure":
            continue
        if r.get("error") or r.get("error_class"):
            continue
        end = r.get("end_ns") or r.get("done_ns")
        prompt = r.get("prompt_tokens") or r.get("prompt_tokens_expected")
        if not end or not prompt:
            raise ServetuneError(
                "a result record lacks its end time or prompt length",
                "give servetune's per-request records (sent_ns, chunk_ns, done_ns, prompt_tokens)",
            )
        chunks = r.get("chunk_ns") or []
        complete = bool(chunks) and (len(chunks) >= r["output_tokens"] or not one_chunk_per_token)
        out.append(
            MeasuredRequest(
                prompt_tokens=int(prompt),
                output_tokens=int(r["output_tokens"]),
                sent=r["sent_ns"] / 1e9,
                first_token=chunks[0] / 1e9 if complete else None,
                end=end / 1e9,
            )
        )
    return sorted(out, key=lambda m: m.sent)


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
    """One load point's measured run (closed loop at the records' concurrency)."""
    records = read_records(path)
    requests = measured_requests(records, one_chunk_per_token=not deployment.limits.num_speculative_tokens)
    if not any(r.first_token is not None for r in requests):
        raise ServetuneError(f"{path} has no successful request with a complete stream", "re-run the load point")
    concurrency = next((r["concurrency"] for r in records if r.get("concurrency")), None)
    summary = path.with_name(path.stem + ".summary.json")
    if concurrency is None and summary.exists():
        concurrency = json.loads(summary.read_text()).get("concurrency")
    if concurrency is None:
        raise ServetuneError(
            f"{path}: no concurrency in the records or {summary.name}", "record the closed-loop concurrency of the run"
        )
    concurrency = int(concurrency)
    return MeasuredRun(name or path.stem, concurrency, tuple(requests), deployment)
