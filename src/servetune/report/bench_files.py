"""The files of a `servetune bench` run besides its own JSON/JSONL/CSV: vLLM's result JSON (`--save-result`), with
servetune's run file and records beside it under the same name, and the bench report (`--html`).

vLLM's file is named as vLLM names it (`{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json` in
`--result-dir`, or `--result-filename`); a sweep writes one per level (a given `--result-filename` gets the level
before `.json`). `--append-result` appends one JSON object per line, as vLLM does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from servetune.fileio import atomic_write_text
from servetune.load.bench_args import BenchArgs
from servetune.load.options import LoadOptions
from servetune.load.runner import LoadResult
from servetune.metrics.runs import RUN_SUFFIX, BenchRun, RunSource, write_run
from servetune.metrics.vllm_format import figures_of, result_filename, vllm_result
from servetune.report.bench import write_bench_report
from servetune.secrets import redact


def _level(result: LoadResult) -> tuple[Literal["concurrency", "rate"], float]:
    shape = result.shape
    if shape.kind == "concurrency":
        assert shape.concurrency is not None
        return "concurrency", float(shape.concurrency)
    return "rate", float(shape.rate if shape.rate is not None else float("inf"))


def bench_runs(args: BenchArgs, options: LoadOptions, model: str, results: Sequence[LoadResult]) -> list[BenchRun]:
    """Each result as a run of the bench folder (source servetune, label = --label or the model)."""
    runs = []
    for result in results:
        kind, level = _level(result)
        source = RunSource(
            tool="servetune",
            path="",
            label=args.label or model,
            model=args.model_id or model,
            kind=kind,
            level=level,
            started_at=result.started_at,
        )
        runs.append(
            BenchRun(
                source=source,
                figures=figures_of(result.summary, args.percentile_metrics),
                summary=result.summary,
                records=result.records,
                settings={
                    "shape": result.shape.model_dump(mode="json"),
                    "workload": result.workload.model_dump(mode="json"),
                    "endpoint": result.endpoint,
                    "tokenizer": result.tokenizer,
                    "load_options": options.model_dump(mode="json", exclude_defaults=True),
                },
                engine_time=result.engine_time,
            )
        )
    return runs


def _settings(args: BenchArgs, result: LoadResult, model: str, date: str) -> dict[str, Any]:
    """The keys vLLM writes before its figures."""
    shape = result.shape
    if shape.kind == "concurrency":
        rate: float | str = "inf"
        cap = shape.concurrency
    else:
        rate = "inf" if shape.rate is None or shape.rate == float("inf") else float(shape.rate)
        cap = shape.max_concurrency
    measured = sum(1 for r in result.records if r.phase == "measure")
    model_id = args.model_id or model
    return {
        "date": date,
        "backend": args.backend_name,
        "label": args.label,
        "model_id": model_id,
        "tokenizer_id": args.tokenizer or model_id,
        "num_prompts": shape.requests or measured,
        **redact(args.metadata_items),
        "request_rate": rate,
        "burstiness": shape.burstiness,
        "max_concurrency": cap,
    }


def _vllm_path(args: BenchArgs, result: LoadResult, model_id: str, date: str, sweep: bool) -> Path:
    shape = result.shape
    folder = args.result_dir or Path(".")
    if args.result_filename:
        name = args.result_filename
        if sweep:
            stem, dot, ext = name.rpartition(".")
            level = f"c{shape.concurrency}" if shape.kind == "concurrency" else f"{shape.rate:g}qps"
            name = f"{stem}-{level}.{ext}" if dot else f"{name}-{level}"
        return folder / name
    rate = float("inf") if shape.kind == "concurrency" else float(shape.rate or float("inf"))
    cap = shape.concurrency if shape.kind == "concurrency" else shape.max_concurrency
    return folder / result_filename(args.label or args.backend_name, rate, cap, model_id, date)


def write_bench_files(args: BenchArgs, options: LoadOptions, model: str, results: list[LoadResult]) -> dict[str, Path]:
    """A finished bench run's files besides its own: `load.bench.Files`, what `servetune bench` hands its run."""
    return write_bench_outputs(args, options, bench_runs(args, options, model, results), results)


def write_bench_outputs(
    args: BenchArgs, options: LoadOptions, runs: Sequence[BenchRun], results: Sequence[LoadResult]
) -> dict[str, Path]:
    """Writes what the flags ask for; returns the paths by kind, for the terminal."""
    percentiles = options.percentile_values()
    paths: dict[str, Path] = {}
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    written: list[BenchRun] = []
    for i, (run, result) in enumerate(zip(runs, results, strict=True)):
        if not args.writes_vllm_result:
            written.append(run)
            continue
        model_id = run.source.model or ""
        path = _vllm_path(args, result, model_id, date, sweep=len(results) > 1)
        data = vllm_result(
            result.summary,
            result.records,
            settings=_settings(args, result, model_id, date),
            metrics=args.percentile_metrics,
            percentiles=percentiles,
            detailed=args.save_detailed,
        )
        text = json.dumps(data)
        if args.append_result and path.is_file() and path.stat().st_size:
            text = path.read_text().rstrip("\n") + "\n" + text
        atomic_write_text(path, text)
        stem = path.name.removesuffix(".json")
        own = run.model_copy(
            update={"source": run.source.model_copy(update={"path": str(path.with_name(stem + RUN_SUFFIX))})}
        )
        write_run(path.parent, stem, own)
        written.append(own)
        paths[f"vllm result {i}" if len(results) > 1 else "vllm result"] = path
    if args.writes_vllm_result:
        paths["servetune runs"] = (args.result_dir or Path(".")).resolve()
    if args.html_out is not None:
        title = f"{runs[0].source.label} ({len(runs)} level(s))" if len(runs) > 1 else runs[0].name
        paths["html"] = write_bench_report(args.html_out.parent, written, title, html=args.html_out)["html"]
    return paths
