"""CLI of the load room: `servetune bench` (load generator) and `servetune mock-server`.

Heavy imports (the load path, rich) happen inside the commands so that `servetune --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from servetune.errors import ServetuneError

if TYPE_CHECKING:
    from servetune.control.client import ControlTimeouts
    from servetune.load.bench_args import BenchArgs
    from servetune.load.options import LoadOptions
    from servetune.load.runner import LoadResult
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Workload
    from servetune.metrics.journal import RecordJournal
    from servetune.metrics.summary import Summary

T = TypeVar("T")
PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
"""bench reads its own argv (servetune's and vLLM's flags, vLLM's `--goodput a:1 b:2` lists): typer passes it on."""


def bench(ctx: typer.Context) -> None:
    """Measure a server with a streaming load: vLLM-named metrics, goodput, errors by class, validity.

    Takes servetune's flags and `vllm bench serve`'s (see --help). Exit code 1 when more requests failed than
    --max-error-rate allows (default 0) or when the run has validity warnings (unless --accept-warnings); 2 for
    bad options."""
    from servetune.engines.models import resolve_tokenizer
    from servetune.load.bench_args import help_text, parse_bench_argv
    from servetune.metrics.journal import RecordJournal

    if any(a in ("-h", "--help") for a in ctx.args):
        typer.echo(help_text())
        raise typer.Exit(0)
    args, options = parse_bench_argv(list(ctx.args))
    for note in args.notes:
        typer.secho(f"note: {note}", err=True)
    _check_outputs(args)
    workload, shape = options.workload(), options.shape()
    control = shape.timeouts.control()
    if args.ready_check_timeout_s:
        _run(_wait_ready(args.url, args.api_key, args.ready_check_timeout_s))
    model = args.model or _run(_first_model(args.url, args.api_key, control))
    journal = RecordJournal(args.jsonl_out)
    for stale in journal.stale:
        typer.secho(f"note: {stale.note()}", err=True)
    kwargs: dict[str, Any] = dict(
        endpoint=args.endpoint,
        stream=args.stream,
        api_key=args.api_key,
        extra_body=args.extra_body,
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
        _files(args, options, model, results)  # the journal stays until every output is written
    except KeyboardInterrupt:
        _partial(args, options, journal, "interrupted")
        raise
    except Exception as err:
        kept = _partial(args, options, journal, f"stopped by an error ({_first_line(err)})")
        if isinstance(err, OSError) and err.filename:  # an output that could not be written (a full disk)
            from servetune.fileio import WriteFailed

            where = f"the run's records are in {kept}" if kept else "no request had finished"
            raise WriteFailed(
                f"cannot write {err.filename}: {err.strerror or err}",
                f"{where}; free space there (or give a path on another disk) and run again",
            ) from None
        raise
    journal.close(finished=True)
    _verdict(summaries, args.max_error_rate, args.accept_warnings)


def _first_line(err: BaseException) -> str:
    text = err.problem if isinstance(err, ServetuneError) else str(err)
    if isinstance(err, OSError) and err.filename:
        text = f"{err.strerror or err}: {err.filename}"
    return text.partition("\n")[0]


def _partial(args: BenchArgs, options: LoadOptions, journal: RecordJournal, why: str) -> Path | None:
    """An unfinished run keeps what it measured: the summary of the finished requests is printed (and written
    to --json, when it can be), and the records journal stays, named; its path is returned (None: nothing
    finished, nothing kept)."""
    import json
    import time

    from servetune.fileio import atomic_write_text

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
    from servetune.fileio import ensure_writable

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
    import asyncio
    import time

    from servetune.control.client import ControlClient, ControlError, ControlTimeouts

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
    from servetune.control.client import ControlClient

    models = await ControlClient(url, api_key=api_key, timeouts=timeouts).models()
    if not models.names:
        raise ServetuneError(f"{url}/v1/models lists no model", "give --model NAME")
    return models.names[0]


def _verdict(summaries: list[Summary], max_error_rate: float, accept_warnings: bool) -> None:
    from servetune.metrics.validity import run_problems

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
    if problems:
        for problem in dict.fromkeys(problems):
            typer.secho(f"bench: {problem}", fg="red", err=True)
        raise typer.Exit(1)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    from servetune.load.runner import run_sync

    return run_sync(coro)


def _print_summary(summary: Summary, title: str) -> None:
    from servetune.metrics.render import summary_lines

    for line in summary_lines(summary, title):
        typer.secho(line, fg="yellow" if line.startswith("WARNING") else None)


def _single(args: BenchArgs, model: str, workload: Workload, shape: LoadShape, kwargs: dict[str, Any]) -> LoadResult:
    from servetune.fileio import atomic_write_text
    from servetune.load.runner import run_load
    from servetune.metrics.export import write_jsonl, write_requests_csv

    result = _run(run_load(args.url, model, workload, shape, progress=args.progress, **kwargs))
    level = f"concurrency {shape.concurrency}" if shape.kind == "concurrency" else f"rate {shape.rate:g}/s"
    _print_summary(result.summary, f"{model} @ {args.url} — {level}")
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
    from servetune.fileio import atomic_write_text
    from servetune.load.sweep import run_sweep
    from servetune.metrics.export import summary_row, write_summary_csv
    from servetune.metrics.render import sweep_lines

    assert args.sweep is not None
    result = _run(
        run_sweep(
            args.url,
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


def _files(args: BenchArgs, options: LoadOptions, model: str, results: list[LoadResult]) -> None:
    """vLLM's result JSON with servetune's run beside it (--save-result), and the bench report (--html)."""
    from servetune.report.bench_files import bench_runs, write_bench_outputs

    runs = bench_runs(args, options, model, results)
    for kind, path in write_bench_outputs(args, options, runs, results).items():
        typer.echo(f"{kind:15s} {path}")


def import_runs(
    files: list[Path] = typer.Argument(
        ...,
        help="Result files: vllm bench serve --save-result JSON, a vllm bench sweep folder's run=N.json, "
        "GuideLLM benchmarks.json, AIPerf profile_export_aiperf.json / profile_export.jsonl (or their folder).",
    ),
    into: Path = typer.Option(..., "--into", help="The bench folder to add them to (created if missing)."),
    force: bool = typer.Option(False, "--force", help="Import a result again even if the folder has it already."),
) -> None:
    """Copy other tools' results into a bench folder as servetune runs, for `servetune report DIR`.

    Per-request timings are kept where the file has them (vLLM --save-detailed, AIPerf's JSONL, GuideLLM's
    requests), so the report recomputes every figure with vLLM's definitions. A result already in the folder
    (the same content, whatever its file name) is skipped and named; --force imports it again."""
    from servetune.metrics.imports import import_files

    done = import_files(files, into, force=force)
    for item in done:
        run = item.run
        if item.already:
            typer.echo(f"already imported: {run.source.path} ({run.name}) is {item.path}; --force imports it again")
        else:
            typer.echo(f"{run.source.tool:9s} {run.name:40s} {len(run.records):7,} requests  {item.path}")
    written = sum(not item.already for item in done)
    skipped = f", {len(done) - written} already there" if written < len(done) else ""
    typer.echo(f"{written} run(s) added to {into}{skipped}; draw them with `servetune report {into}`")


def mock_server(
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8000),
    model: str = typer.Option("mock"),
    ttft_ms: float = typer.Option(50.0),
    itl_ms: float = typer.Option(10.0),
    output_tokens: int = typer.Option(128, help="Answer length when a request gives no max_tokens"),
    reasoning_tokens: int = typer.Option(0, help="Chat answers start with this many reasoning tokens"),
    fault: list[str] = typer.Option(
        [], help="Misbehave: kind[:after=N][:seconds=S][:status=CODE][:every=N]; repeatable"
    ),
    precise: bool = typer.Option(True, "--precise/--coarse", help="Spin to exact send times (costs a little CPU)"),
    uvloop: bool = typer.Option(False, "--uvloop", help="Run on uvloop (cheaper, ms timer resolution)"),
    reuse_port: bool = typer.Option(
        False, "--reuse-port", help="Share the port with other mock servers (SO_REUSEPORT): one per CPU"
    ),
    api_key: str | None = typer.Option(None, help="Require this bearer token on /v1/ routes"),
) -> None:
    """A fast OpenAI-compatible streaming server with fixed TTFT and ITL, for measuring clients and tests."""
    from servetune.mock.config import Fault, MockConfig
    from servetune.mock.server import serve_forever
    from servetune.process.interrupts import run_coroutine

    config = MockConfig(
        model=model, ttft_ms=ttft_ms, itl_ms=itl_ms, output_tokens=output_tokens, reasoning_tokens=reasoning_tokens,
        precise=precise, api_key=api_key, faults=tuple(Fault.parse(f) for f in fault),
    )  # fmt: skip

    def ready(bound: int) -> None:
        typer.echo(
            f"mock server ready on http://{host}:{bound} (model {model}, ttft {ttft_ms} ms, itl {itl_ms} ms)", err=True
        )

    coro = serve_forever(config, host, port, ready, reuse_port=reuse_port)
    try:
        if uvloop:
            import uvloop as _uvloop

            run_coroutine(coro, _uvloop.new_event_loop)
        else:
            run_coroutine(coro)
    except KeyboardInterrupt:
        pass
    except OSError as err:
        raise ServetuneError(f"cannot listen on {host}:{port}: {err}", "pick a free port with --port") from None


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("bench", context_settings=PASSTHROUGH, add_help_option=False)(bench)
    app.command("import")(import_runs)
    app.command("mock-server")(mock_server)
