"""What `servetune bench` does with its arguments (`load/bench_args.py` `BenchArgs`): wait for the server if
asked, find its model, run the load (one level or a sweep), journal every record as it finishes, print vLLM-named
summaries, have the run's files written, and give the verdict as an exit code (1 when more requests failed than
`--max-error-rate` allows, or the run has validity warnings without `--accept-warnings`).

An unfinished run keeps what it measured: the summary of the finished requests is printed (and written to
`--json`, when it can be) and the records journal stays, named. The journal stays until every output is written,
so an output the disk refuses leaves the records behind and the error names both the file and the journal. The
files of a finished run (vLLM's result JSON, the bench report) are the report room's: the caller hands in `files`,
the writer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

import typer

from servetune.control.client import ControlClient, ControlError, ControlTimeouts
from servetune.engines.models import resolve_tokenizer
from servetune.errors import ServetuneError
from servetune.fileio import WriteFailed, atomic_write_text, ensure_writable
from servetune.load.bench_args import BenchArgs
from servetune.load.options import LoadOptions
from servetune.load.runner import LoadResult, run_load, run_sync
from servetune.load.shape import LoadShape
from servetune.load.sweep import run_sweep
from servetune.load.workload import Workload
from servetune.metrics.export import summary_row, write_jsonl, write_requests_csv, write_summary_csv
from servetune.metrics.journal import RecordJournal
from servetune.metrics.render import summary_lines, sweep_lines
from servetune.metrics.summary import Summary
from servetune.metrics.validity import run_problems

T = TypeVar("T")


class Files(Protocol):
    """Writes a finished run's files (vLLM's result JSON, servetune's runs, the bench report); returns them by
    kind, for the terminal."""

    def __call__(
        self, args: BenchArgs, options: LoadOptions, model: str, results: list[LoadResult]
    ) -> dict[str, Path]: ...


def run_bench(args: BenchArgs, files: Files) -> int:
    """`servetune bench`: the exit code."""
    for note in args.notes:
        typer.secho(f"note: {note}", err=True)
    options = args.load()
    _check_outputs(args)
    workload, shape = options.workload(), options.shape()
    control = shape.timeouts.control()
    if args.ready_check_timeout_s:
        _run(_wait_ready(args.target, args.key, args.ready_check_timeout_s))
    model = args.request_model or _run(_first_model(args.target, args.key, control))
    journal = RecordJournal(args.jsonl_out)
    for stale in journal.stale:
        typer.secho(f"note: {stale.note()}", err=True)
    kwargs: dict[str, Any] = dict(
        endpoint=args.api,
        stream=args.stream,
        api_key=args.key,
        extra_body=args.body,
        tokenizer=resolve_tokenizer(args.tokenizer),
        slos=options.slos(),
        percentiles=options.percentile_values(),
        keep_text=args.save_detailed,
        workers=args.workers,
        control=control,
        on_record=journal.add,
    )
    if args.ray is not None:
        from servetune.load.transport import require_ray

        require_ray("bench --ray")
        from servetune.load.ray_transport import RayPool

        kwargs["pool"] = RayPool(None if args.ray == "auto" else args.ray, args.ray_nodes)
    try:
        if args.sweep:
            results, summaries = _sweep(args, model, workload, shape, kwargs, journal)
        else:
            result = _single(args, model, workload, shape, kwargs)
            results, summaries = [result], [result.summary]
        for kind, path in files(args, options, model, results).items():  # the journal stays until all are written
            typer.echo(f"{kind:15s} {path}")
    except KeyboardInterrupt:
        _partial(args, options, journal, "interrupted")
        raise
    except Exception as err:
        kept = _partial(args, options, journal, f"stopped by an error ({_first_line(err)})")
        if isinstance(err, OSError) and err.filename:  # an output that could not be written (a full disk)
            where = f"the run's records are in {kept}" if kept else "no request had finished"
            raise WriteFailed(
                f"cannot write {err.filename}: {err.strerror or err}",
                f"{where}; free space there (or give a path on another disk) and run again",
            ) from None
        raise
    journal.close(finished=True)
    return _verdict(summaries, args.max_error_rate, args.accept_warnings)


def _first_line(err: BaseException) -> str:
    text = err.problem if isinstance(err, ServetuneError) else str(err)
    if isinstance(err, OSError) and err.filename:
        text = f"{err.strerror or err}: {err.filename}"
    return text.partition("\n")[0]


def _partial(args: BenchArgs, options: LoadOptions, journal: RecordJournal, why: str) -> Path | None:
    """An unfinished run keeps what it measured: the summary of the finished requests is printed (and written
    to --json, when it can be), and the records journal stays, named; its path is returned (None: nothing
    finished, nothing kept)."""
    if journal.count == 0:  # nothing was measured: nothing to keep
        journal.close(finished=True)
        return None
    journal.close(finished=False)
    elapsed = time.monotonic() - journal.started
    summaries = journal.partial_summaries(slos=options.slos(), percentiles=options.percentile_values())
    typer.secho(
        f"bench {why} after {elapsed:.1f} s: {journal.count} requests finished; the summary below covers the "
        "measured ones",
        fg="yellow",
        err=True,
    )
    for level, summary in summaries:
        _print_summary(summary, "PARTIAL" + (f" — level {level:g}" if level is not None else ""))
    typer.secho(f"records so far: {journal.path}", err=True)
    if args.json_out:
        data = {
            "partial": True,
            "reason": why,
            "records": str(journal.path),
            "levels": [{"level": level, "summary": s.model_dump(mode="json")} for level, s in summaries],
        }
        try:
            atomic_write_text(args.json_out, json.dumps(data, indent=2))
            typer.secho(f"partial summary: {args.json_out}", err=True)
        except OSError as err:  # the disk that failed the run's own write: the records are named above
            typer.secho(f"partial summary not written: {err.strerror or err}: {args.json_out}", err=True)
    return journal.path


def _check_outputs(args: BenchArgs) -> None:
    """Every output path is checked before the run starts (a typo must not cost the run)."""
    for path, what in ((args.json_out, "--json"), (args.jsonl_out, "--jsonl"), (args.csv_out, "--csv")):
        if path is not None:
            ensure_writable(path, f"{what} file")
    if args.html_out is not None:
        ensure_writable(args.html_out, "--html report")
    if args.writes_vllm_result:
        folder = args.result_dir or Path(".")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ServetuneError(
                f"cannot create --result-dir {folder}: {err.strerror}", "give a writable folder"
            ) from None
        ensure_writable(folder / ".servetune-result-check", "--result-dir")


async def _wait_ready(url: str, api_key: str | None, timeout_s: float) -> None:
    """vLLM's --ready-check-timeout-sec: poll /health until it answers 200."""
    deadline = time.monotonic() + timeout_s
    client = ControlClient(url, api_key=api_key, timeouts=ControlTimeouts(total_s=5.0))
    while True:
        try:
            if await client.health() == 200:
                return
        except ControlError:
            pass
        if time.monotonic() > deadline:
            raise ServetuneError(
                f"{url} was not ready within {timeout_s:g} s (/health)", "start the server, or wait longer"
            )
        await asyncio.sleep(1.0)


async def _first_model(url: str, api_key: str | None, timeouts: ControlTimeouts) -> str:
    """vLLM's rule without --model: the first model the server lists."""
    models = await ControlClient(url, api_key=api_key, timeouts=timeouts).models()
    if not models.names:
        raise ServetuneError(f"{url}/v1/models lists no model", "give --model NAME")
    return models.names[0]


def _verdict(summaries: list[Summary], max_error_rate: float, accept_warnings: bool) -> int:
    problems = [
        p
        for s in summaries
        for p in run_problems(
            s.error_rate,
            s.failed,
            s.completed + s.failed,
            s.validity,
            max_error_rate=max_error_rate,
            accept_warnings=accept_warnings,
        )
    ]
    for problem in dict.fromkeys(problems):
        typer.secho(f"bench: {problem}", fg="red", err=True)
    return 1 if problems else 0


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return run_sync(coro)


def _print_summary(summary: Summary, title: str) -> None:
    for line in summary_lines(summary, title):
        typer.secho(line, fg="yellow" if line.startswith("WARNING") else None)


def _single(args: BenchArgs, model: str, workload: Workload, shape: LoadShape, kwargs: dict[str, Any]) -> LoadResult:
    result = _run(run_load(args.target, model, workload, shape, progress=args.progress, **kwargs))
    level = f"concurrency {shape.concurrency}" if shape.kind == "concurrency" else f"rate {shape.rate:g}/s"
    _print_summary(result.summary, f"{model} @ {args.target} — {level}")
    if result.engine_time is not None:
        for line in result.engine_time.lines():
            typer.echo(line)
    if args.json_out:
        atomic_write_text(args.json_out, result.to_json())
    if args.jsonl_out:
        write_jsonl(result.records, args.jsonl_out)
    if args.csv_out:
        write_requests_csv(result.records, args.csv_out)
    return result


def _sweep(
    args: BenchArgs,
    model: str,
    workload: Workload,
    shape: LoadShape,
    kwargs: dict[str, Any],
    journal: RecordJournal,
) -> tuple[list[LoadResult], list[Summary]]:
    assert args.sweep is not None
    result = _run(
        run_sweep(
            args.target,
            model,
            workload,
            shape,
            list(args.sweep),
            progress=args.progress,
            on_level=journal.start_level,
            **kwargs,
        )
    )
    for line in sweep_lines([(p.level, p.result.summary) for p in result.points], shape.kind):
        typer.secho(line, fg="yellow" if line.lstrip().startswith("WARNING") else None)
    for p in result.points:
        if p.result.engine_time is not None:
            typer.echo(f"level {p.level:g}: {p.result.engine_time.lines()[0]}")
    if result.saturated_at is not None:
        typer.echo(f"saturated at {result.saturated_at:g}: {result.reason}")
    if args.json_out:
        atomic_write_text(args.json_out, result.to_json())
    if args.csv_out:
        write_summary_csv(
            [summary_row(p.result.summary, level=p.level, kind=shape.kind) for p in result.points], args.csv_out
        )
    # The level the sweep stopped at is saturated by definition (its failures are what stopped it): the verdict
    # judges the levels before it.
    judged = [p.result.summary for p in result.points if p.level != result.saturated_at]
    return [p.result for p in result.points], judged
