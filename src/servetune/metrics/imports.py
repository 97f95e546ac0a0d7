"""Other tools' result files as servetune runs: `vllm bench serve` (and `vllm bench sweep`), GuideLLM, AIPerf.

Each reader maps the tool's figures onto vLLM's flat names (`request_throughput`, `p99_ttft_ms`, ...) with the
tool's definitions translated, not just renamed: GuideLLM's and AIPerf's "inter-token latency" is vLLM's TPOT
((e2el − ttft)/(n − 1)), AIPerf's inter-chunk latency is vLLM's ITL, GuideLLM's "time per output token" (which
counts the first token) has no vLLM name and is left out, GuideLLM's request latency is in seconds. When a file
holds per-request timings the reader rebuilds servetune's `RequestRecord`s — exactly for vLLM `--save-detailed`
(start, TTFT, every gap) and AIPerf's `profile_export.jsonl` (start, TTFT, every inter-chunk gap), approximately
for GuideLLM (first and last token times and the number of iterations: the gaps between are taken as equal, which
the run's notes say) — and the report recomputes every figure from them with servetune's (vLLM's) definitions.
A rebuilt record's planned prompt length is the one the tool reported (servetune cannot know what the other tool
planned), so servetune's own tokenizer checks stay quiet on imported runs.

Formats, read from the tools' own sources: vLLM `benchmarks/serve.py` (`result_json`), `benchmarks/sweep/serve.py`
(`run=N.json`, `summary.json`); GuideLLM `benchmark/schemas/report.py` (`GenerativeBenchmarksReport`: metadata,
config, benchmarks[] with metrics.* distributions and requests.{successful,errored,incomplete}); AIPerf
`profile_export_aiperf.json` (metric tag → {unit, avg, p50, ...}, input_config: the load as its `phases` since 0.13,
`loadgen` before) and `profile_export.jsonl`
(metadata.request_start_ns, metrics.{time_to_first_token, inter_chunk_latency, ...}, error).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from servetune.errors import ServetuneError
from servetune.metrics.import_schema import (
    check_aiperf_record,
    check_aiperf_summary,
    check_guidellm,
    check_run_figures,
    check_vllm,
)
from servetune.metrics.record import ErrorClass, RequestRecord
from servetune.metrics.runs import RECORDS_SUFFIX, RUN_SUFFIX, BenchRun, RunSource, Tool, read_run, run_stem, write_run
from servetune.metrics.vllm_format import figures_from_file, percentile_word, records_from_vllm
from servetune.secrets import redact

AIPERF_RECORDS = "profile_export.jsonl"
AIPERF_SUMMARY = "profile_export_aiperf.json"


@dataclass(frozen=True)
class Imported:
    """One run of `servetune import`: where it now lies, and whether it was there already (then not written)."""

    run: BenchRun
    path: Path
    already: bool = False


def import_files(files: Sequence[Path], into: Path, *, force: bool = False) -> list[Imported]:
    """Copies every run of `files` into the bench folder `into` as servetune run files. A run whose content was
    imported before (same file bytes, renamed or not) is not written again (`already`), unless `force`: a
    second copy would count one measurement twice in the report."""
    for file in files:
        if not file.exists():
            raise ServetuneError(f"{file} does not exist", "give result files written by a benchmark tool")
    read = [(content_digest(file), read_runs(file)) for file in files]  # every file checked before one is written
    known = _imported(into)
    out: list[Imported] = []
    for digest, runs in read:
        for run in runs:
            _, hash_sign, index = run.source.path.partition("#")
            key = digest + (f"#{index}" if hash_sign else "")
            if key in known and not force:
                out.append(Imported(run, known[key], already=True))
                continue
            run = run.model_copy(update={"source": run.source.model_copy(update={"content_sha256": key})})
            path = write_run(into, _free_stem(into, run), run)
            known.setdefault(key, path)
            out.append(Imported(run, path))
    return out


def content_digest(path: Path) -> str:
    """sha256 of a result file's bytes (of an AIPerf export folder: its summary, then its records)."""
    h = hashlib.sha256()
    folder = path if path.is_dir() else path.parent if path.name == AIPERF_RECORDS else None
    parts = [folder / AIPERF_SUMMARY, folder / AIPERF_RECORDS] if folder is not None else [path]
    for part in parts:
        if part.is_file():
            try:
                h.update(part.read_bytes())
            except OSError as err:
                raise ServetuneError(f"cannot read {part}: {err.strerror}", "give a readable result file") from None
    return h.hexdigest()


def _imported(into: Path) -> dict[str, Path]:
    """The runs of a bench folder that were imported, by content."""
    found: dict[str, Path] = {}
    for path in sorted(into.glob(f"*{RUN_SUFFIX}")) if into.is_dir() else []:
        try:
            key = json.loads(path.read_text()).get("source", {}).get("content_sha256")
        except (OSError, ValueError, AttributeError):
            continue  # not a run file servetune can read: `report` says so
        if isinstance(key, str):
            found.setdefault(key, path)
    return found


def _free_stem(into: Path, run: BenchRun) -> str:
    """A file name for a run: its tool, label and level, made unique with -2, -3... (a different run of the
    same name, e.g. the same command measured twice)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{run.source.tool}-{run.source.label}-{run.source.level_text}")
    stem, n = base, 1
    while (into / f"{stem}{RUN_SUFFIX}").exists():
        n += 1
        stem = f"{base}-{n}"
    return stem


def read_runs(path: Path) -> list[BenchRun]:
    """Every run in a file of any known tool (an AIPerf export folder counts as one file)."""
    if path.is_dir():
        if (path / AIPERF_SUMMARY).is_file() or (path / AIPERF_RECORDS).is_file():
            return [_aiperf(path)]
        raise ServetuneError(f"{path} is a folder", "give a result file, or `servetune report` the folder")
    if path.name == AIPERF_RECORDS:
        return [_aiperf(path.parent)]
    text = _text(path)
    data = _parse(path, text)
    tool = detect(data)
    if tool == "servetune":
        check_run_figures(data.get("figures") or {}, f"{path}: figures")
        return [read_run(path, data)]
    if tool == "guidellm":
        check_guidellm(data, str(path))
        return _guidellm(path, data)
    if tool == "aiperf":
        return [_aiperf(path.parent, data)]
    if tool == "vllm":
        items = data if isinstance(data, list) else [data]
        for i, item in enumerate(items):
            check_vllm(item, f"{path}" + (f" (run {i + 1} of {len(items)})" if len(items) > 1 else ""))
        return [_vllm(path, item, i if len(items) > 1 else None) for i, item in enumerate(items)]
    raise ServetuneError(
        f"{path} is not a result file servetune reads",
        "give a servetune run, a `vllm bench serve --save-result` JSON, a GuideLLM benchmarks.json or an AIPerf "
        "profile_export_aiperf.json / profile_export.jsonl",
    )


def detect(data: Any) -> Tool | None:
    """Which tool wrote a parsed result file (None: none servetune knows)."""
    if isinstance(data, list):
        return "vllm" if data and all(isinstance(d, dict) and _is_vllm(d) for d in data) else None
    if not isinstance(data, dict):
        return None
    if "servetune_run" in data:
        return "servetune"
    if isinstance(data.get("benchmarks"), list) and "metadata" in data:
        return "guidellm"
    if _is_vllm(data):
        return "vllm"
    metric = data.get("time_to_first_token") or data.get("request_latency") or data.get("request_throughput")
    if isinstance(metric, dict) and "unit" in metric:
        return "aiperf"
    return None


def _is_vllm(data: Mapping[str, Any]) -> bool:
    return "request_throughput" in data and "completed" in data and not isinstance(data["request_throughput"], dict)


def find_runs(folder: Path) -> list[BenchRun]:
    """The runs of a bench folder, each once: servetune's run files first; a vLLM file that is the twin of one
    (same name, written beside it by `bench --save-result`) is skipped; a `vllm bench sweep` folder's
    `summary.json` is skipped where its `run=N.json` files are read; AIPerf export folders count once."""
    runs: list[BenchRun] = []
    own = {run_stem(p) for p in folder.rglob(f"*{RUN_SUFFIX}")}
    seen_aiperf: set[Path] = set()
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        if path.name in (AIPERF_SUMMARY, AIPERF_RECORDS):
            if path.parent not in seen_aiperf:
                seen_aiperf.add(path.parent)
                runs.append(_aiperf(path.parent))
            continue
        if path.suffix != ".json" or path.name.endswith(RECORDS_SUFFIX):
            continue
        if not path.name.endswith(RUN_SUFFIX) and run_stem(path) in own:
            continue  # vLLM's twin of a servetune run
        if path.name == "summary.json" and any(path.parent.glob("run=*.json")):
            continue
        try:
            data = _parse(path, _text(path))
        except ServetuneError:
            continue  # not every JSON file in a folder is a result
        tool = detect(data)
        if tool is None:
            continue
        runs.extend(read_runs(path))
    return runs


# --- vLLM ---------------------------------------------------------------------------------------------------------


def _vllm(path: Path, data: Mapping[str, Any], index: int | None) -> BenchRun:
    rate = data.get("request_rate")  # a number or "inf" (`check_vllm`)
    rate_value = float("inf") if rate in ("inf", None) else float(rate)
    concurrency = data.get("max_concurrency")
    kind: Literal["concurrency", "rate"] = "rate"
    level = rate_value
    if concurrency is not None and rate_value == float("inf"):
        kind, level = "concurrency", float(concurrency)  # all at t=0 with N in flight: a closed loop
    sweep = path.parent.name if path.name.startswith("run=") or path.name == "summary.json" else None
    model_id = str(data.get("model_id") or "")
    label = str(data.get("label") or sweep or model_id.split("/")[-1] or run_stem(path))
    notes = [] if "ttfts" in data else ["no per-request data (run vLLM with --save-detailed for distributions)"]
    settings = redact({k: v for k, v in data.items() if not isinstance(v, list)})
    source = RunSource(
        tool="vllm",
        path=str(path) + (f"#{index}" if index is not None else ""),
        label=label,
        model=data.get("model_id"),
        kind=kind,
        level=level,
        started_at=data.get("date"),
        notes=tuple(notes),
    )
    return BenchRun.of(source, figures_from_file(data), records_from_vllm(data), settings, _vllm_percentiles(data))


def _vllm_percentiles(data: Mapping[str, Any]) -> list[float]:
    found = {50.0, 90.0, 95.0, 99.0}
    for key in data:
        if key.startswith("p") and key.endswith("_ttft_ms"):
            try:
                found.add(float(key[1:].split("_")[0]))
            except ValueError:
                continue
    return sorted(found)


# --- GuideLLM -----------------------------------------------------------------------------------------------------

_GUIDELLM_FIGURES = {
    "time_to_first_token_ms": ("ttft", 1.0),
    "inter_token_latency_ms": ("tpot", 1.0),  # GuideLLM's ITL = (last − first) / (n − 1): vLLM's TPOT
    "request_latency": ("e2el", 1000.0),  # seconds
    "time_to_first_output_token_ms": ("ttfc", 1.0),
}


def _guidellm(path: Path, data: Mapping[str, Any]) -> list[BenchRun]:
    runs = []
    for i, bench in enumerate(data["benchmarks"]):
        metrics = bench.get("metrics") or {}
        figures: dict[str, float] = {}
        for name, (vllm, scale) in _GUIDELLM_FIGURES.items():
            dist = (metrics.get(name) or {}).get("successful") or {}
            figures.update(_dist_figures(vllm, dist, scale))
        for name, key in (
            ("requests_per_second", "request_throughput"),
            ("output_tokens_per_second", "output_throughput"),
        ):
            dist = (metrics.get(name) or {}).get("successful") or {}
            if isinstance(dist.get("mean"), int | float):
                figures[key] = float(dist["mean"])
        if isinstance(bench.get("duration"), int | float):
            figures["duration"] = float(bench["duration"])
        requests = bench.get("requests") or {}
        records = _guidellm_records(requests)
        if records:
            figures["completed"] = float(sum(1 for r in records if r.ok))
            figures["failed"] = float(sum(1 for r in records if not r.ok))
        strategy = (bench.get("config") or {}).get("strategy") or {}
        kind, level = _guidellm_level(strategy)
        notes = ["ITL approximated: GuideLLM keeps the first and last token times, gaps between are taken as equal"]
        if not records:
            notes = ["no per-request data in the file (GuideLLM --metrics sample_size=0?)"]
        source = RunSource(
            tool="guidellm",
            path=f"{path}#{i}",
            label=_guidellm_label(data, bench, strategy, path),
            model=_guidellm_model(bench),
            kind=kind,
            level=level,
            started_at=str(bench.get("start_time")) if bench.get("start_time") else None,
            notes=tuple(notes),
        )
        runs.append(
            BenchRun.of(source, figures, records, redact({"strategy": (bench.get("config") or {}).get("strategy")}))
        )
    return runs


def _dist_figures(name: str, dist: Mapping[str, Any], scale: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, ours in (("mean", "mean"), ("median", "median"), ("std_dev", "std")):
        if isinstance(dist.get(key), int | float):
            out[f"{ours}_{name}_ms"] = float(dist[key]) * scale
    for key, value in (dist.get("percentiles") or {}).items():
        q = {"p001": 0.1, "p01": 1, "p05": 5, "p999": 99.9}.get(key)
        if q is None and key.startswith("p") and key[1:].isdigit():
            q = float(key[1:])
        if q is not None and isinstance(value, int | float):
            out[f"p{percentile_word(float(q))}_{name}_ms"] = float(value) * scale
    return out


def _guidellm_records(requests: Mapping[str, Any]) -> list[RequestRecord]:
    out: list[RequestRecord] = []
    for status in ("successful", "errored", "incomplete"):
        for item in requests.get(status) or []:
            timings = (item.get("info") or {}).get("timings") or {}
            start, end = timings.get("request_start"), timings.get("request_end") or timings.get("resolve_end")
            if start is None or end is None:
                continue
            first, last = timings.get("first_token_iteration"), timings.get("last_token_iteration")
            iterations = int(timings.get("token_iterations") or 0)
            chunks: list[int] = []
            if status == "successful" and first is not None:
                last = last if last is not None else first
                n = max(iterations, 1)
                step = (last - first) / (n - 1) if n > 1 else 0.0
                chunks = [_ns(first + k * step) for k in range(n)]
            output = item.get("output_tokens")
            out.append(
                RequestRecord(
                    index=len(out),
                    sent_ns=_ns(start),
                    scheduled_ns=_ns(timings.get("targeted_start") or start),
                    dispatched_ns=_ns(start),
                    done_ns=_ns(end),
                    chunk_ns=chunks,
                    prompt_tokens=item.get("prompt_tokens"),
                    prompt_tokens_expected=item.get("prompt_tokens"),
                    output_tokens=int(output) if isinstance(output, int | float) else len(chunks),
                    output_tokens_source="usage" if isinstance(output, int | float) else "chunks",
                    error_class=None if status == "successful" else _guidellm_error(status),
                    error=None if status == "successful" else str(item.get("error") or status)[:500],
                )
            )
    out.sort(key=lambda r: r.sent_ns)
    return [r.model_copy(update={"index": i}) for i, r in enumerate(out)]


def _guidellm_error(status: str) -> ErrorClass:
    return ErrorClass.TRUNCATED if status == "incomplete" else ErrorClass.HTTP_5XX


Level = tuple[Literal["concurrency", "rate"] | None, float | None]


def _guidellm_level(strategy: Mapping[str, Any]) -> Level:
    kind = strategy.get("type_") or strategy.get("type")
    if kind == "synchronous":
        return "concurrency", 1.0
    if kind == "concurrent" and strategy.get("streams"):
        return "concurrency", float(strategy["streams"])
    if kind in ("constant", "poisson") and strategy.get("rate"):
        return "rate", float(strategy["rate"])
    if kind == "throughput":
        cap = strategy.get("max_concurrency")
        return ("concurrency", float(cap)) if cap else ("rate", float("inf"))
    return None, None


def _guidellm_label(data: Mapping[str, Any], bench: Mapping[str, Any], strategy: Mapping[str, Any], path: Path) -> str:
    """The series a benchmark belongs to: its profile, and within a profile that mixes strategies (a sweep:
    synchronous, throughput, then constant rates) the strategy too, so that only runs measured alike form a
    curve. The profile is read where GuideLLM 0.8 writes it (each benchmark's `config.profile.kind`) or 0.6
    (the report's `config.profile.type_`)."""
    config: Mapping[str, Any] = data["config"] if isinstance(data.get("config"), dict) else {}
    spec: Mapping[str, Any] = config["spec"] if isinstance(config.get("spec"), dict) else {}
    profiles = [(bench.get("config") or {}).get("profile"), config.get("profile"), spec.get("profile")]
    kinds = [p.get("kind") or p.get("type_") for p in profiles if isinstance(p, dict)]
    profile = next((str(k) for k in kinds if k), None)
    if profile is None:
        return f"guidellm {path.stem}"
    kind = strategy.get("type_") or strategy.get("type")
    return f"guidellm {profile}" if not kind or kind == profile else f"guidellm {profile} ({kind})"


def _guidellm_model(bench: Mapping[str, Any]) -> str | None:
    backend = (bench.get("config") or {}).get("backend") or {}
    model = backend.get("model") if isinstance(backend, dict) else None
    return str(model) if model else None


# --- AIPerf -------------------------------------------------------------------------------------------------------

_AIPERF_FIGURES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",  # AIPerf's ITL = (e2e − ttft) / (osl − 1): vLLM's TPOT
    "inter_chunk_latency": "itl",
    "request_latency": "e2el",
}


def _aiperf(folder: Path, summary: Mapping[str, Any] | None = None) -> BenchRun:
    if summary is None and (folder / AIPERF_SUMMARY).is_file():
        summary = _parse(folder / AIPERF_SUMMARY, _text(folder / AIPERF_SUMMARY))
    if summary is not None and not isinstance(summary, dict):
        raise ServetuneError(f"{folder / AIPERF_SUMMARY} is not AIPerf's summary (not a mapping)", "give AIPerf's")
    summary = dict(summary or {})
    check_aiperf_summary(summary, str(folder / AIPERF_SUMMARY))
    figures: dict[str, float] = {}
    for tag, name in _AIPERF_FIGURES.items():
        metric = summary.get(tag)
        if isinstance(metric, dict):
            for key, ours in (("avg", "mean"), ("p50", "median"), ("std", "std")):
                if isinstance(metric.get(key), int | float):
                    figures[f"{ours}_{name}_ms"] = float(metric[key])
            for key, value in metric.items():
                if key.startswith("p") and key[1:].isdigit() and isinstance(value, int | float):
                    figures[f"p{key[1:]}_{name}_ms"] = float(value)
    for tag, key in (
        ("request_throughput", "request_throughput"),
        ("output_token_throughput", "output_throughput"),
        ("request_count", "completed"),
        ("error_request_count", "failed"),
        ("benchmark_duration", "duration"),
        ("goodput", "request_goodput"),
    ):
        metric = summary.get(tag)
        if isinstance(metric, dict) and isinstance(metric.get("avg"), int | float):
            figures[key] = float(metric["avg"])
    config: dict[str, Any] = summary["input_config"] if isinstance(summary.get("input_config"), dict) else {}
    loadgen = _aiperf_load(config)
    kind: Literal["concurrency", "rate"] | None = None
    level: float | None = None
    if loadgen.get("request_rate"):
        kind, level = "rate", float(loadgen["request_rate"])
    elif loadgen.get("concurrency"):
        kind, level = "concurrency", float(loadgen["concurrency"])
    records = _aiperf_records(folder / AIPERF_RECORDS)
    notes = [] if records else [f"no {AIPERF_RECORDS} beside the summary: figures only, no distributions"]
    model = _aiperf_model(config)
    source = RunSource(
        tool="aiperf",
        path=str(folder / (AIPERF_SUMMARY if summary else AIPERF_RECORDS)),
        label=f"aiperf {model or folder.name}",
        model=model,
        kind=kind,
        level=level,
        started_at=str(summary.get("start_time")) if summary.get("start_time") else None,
        notes=tuple(notes),
    )
    return BenchRun.of(source, figures, records, redact({"loadgen": loadgen}))


def _aiperf_load(config: Mapping[str, Any]) -> dict[str, Any]:
    """The measured load as {request_rate, concurrency}: AIPerf 0.13 writes it as the profiling phase (`phases`:
    `type` concurrency with `concurrency`, or poisson/constant/gamma with `rate` and an optional concurrency
    cap), earlier versions as `loadgen`."""
    if isinstance(config.get("loadgen"), dict):
        return dict(config["loadgen"])
    phases = [p for p in config.get("phases") or [] if isinstance(p, dict)]
    phase = next((p for p in phases if p.get("kind", p.get("name")) == "profiling"), phases[-1] if phases else {})
    if phase.get("rate"):
        return {"request_rate": phase["rate"]}
    return {"concurrency": phase.get("concurrency")} if phase.get("type") == "concurrency" else {}


def _aiperf_model(config: Mapping[str, Any]) -> str | None:
    """The model asked for: `models.items[].name` (AIPerf 0.13) or `endpoint.model_names` (earlier)."""
    items = (config.get("models") or {}).get("items") if isinstance(config.get("models"), dict) else None
    names = [i.get("name") for i in items or [] if isinstance(i, dict)]
    names += (config.get("endpoint") or {}).get("model_names") or []
    return next((str(n) for n in names if n), None)


def _aiperf_records(path: Path) -> list[RequestRecord]:
    if not path.is_file():
        return []
    out: list[RequestRecord] = []
    for n, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise ServetuneError(f"{path} line {n} is not JSON: {err}", "give AIPerf's export") from None
        check_aiperf_record(row, f"{path} line {n}")
        meta, metrics = row["metadata"], row.get("metrics") or {}
        start = int(meta["request_start_ns"])
        end = int(meta.get("request_end_ns") or start)
        error = row.get("error")
        chunks: list[int] = []
        ttft = _value(metrics, "time_to_first_token")
        if not error and ttft is not None:
            offset = ttft * 1e6  # ns after the start, kept apart from the epoch (a float loses ns at 1.7e18)
            chunks.append(start + round(offset))
            for gap in _values(metrics, "inter_chunk_latency"):
                offset += gap * 1e6
                chunks.append(start + round(offset))
        output = _value(metrics, "output_token_count") or _value(metrics, "output_sequence_length")
        prompt = _value(metrics, "input_sequence_length")
        out.append(
            RequestRecord(
                index=len(out),
                phase="measure" if meta.get("benchmark_phase", "profiling") == "profiling" else "warmup",
                turn=int(meta.get("turn_index") or 0),
                sent_ns=start,
                scheduled_ns=start,
                dispatched_ns=start,
                done_ns=end,
                chunk_ns=chunks,
                prompt_tokens=int(prompt) if prompt is not None else None,
                prompt_tokens_expected=int(prompt) if prompt is not None else None,
                output_tokens=int(output) if output is not None else len(chunks),
                output_tokens_source="usage" if output is not None else "chunks",
                http_status=(error or {}).get("code") if isinstance(error, dict) else None,
                error_class=_aiperf_error(error) if error else None,
                error=str((error or {}).get("message") if isinstance(error, dict) else error)[:500] if error else None,
            )
        )
    return out


def _aiperf_error(error: Any) -> ErrorClass:
    code = error.get("code") if isinstance(error, dict) else None
    if code == 429:
        return ErrorClass.HTTP_429
    if isinstance(code, int) and 400 <= code < 500:
        return ErrorClass.HTTP_4XX
    return ErrorClass.HTTP_5XX


def _value(metrics: Mapping[str, Any], name: str) -> float | None:
    item = metrics.get(name)
    value = item.get("value") if isinstance(item, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _values(metrics: Mapping[str, Any], name: str) -> Iterable[float]:
    item = metrics.get(name)
    value = item.get("value") if isinstance(item, dict) else None
    return [float(v) for v in value] if isinstance(value, list) else []


# --- files --------------------------------------------------------------------------------------------------------


def _ns(seconds: float) -> int:
    return round(float(seconds) * 1e9)


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ServetuneError(f"cannot read {path}: {err}", "give a UTF-8 JSON result file") from None


def _parse(path: Path, text: str) -> Any:
    """JSON, or JSON lines (vLLM's --append-result writes one object per line)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as err:
        raise ServetuneError(f"{path} is not JSON: {err}", "give a JSON result file") from None
    return rows
