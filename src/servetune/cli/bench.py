"""CLI of the load room: `servetune bench` (load generator; its options are `load/bench_args.py` `BenchArgs`,
its run `load/bench.py`), `servetune import` and `servetune mock-server`.

Heavy imports (the load path, rich) happen inside the commands so that `servetune --help` stays fast.
"""

from __future__ import annotations

import typer

from servetune.cli.model_options import PASSTHROUGH, ModelCommand, model_options
from servetune.load.bench_args import IGNORED_FLAGS, REFUSED_FLAGS, BenchArgs
from servetune.metrics.import_args import ImportArgs
from servetune.mock.args import MockServerArgs


def bench(args: BenchArgs) -> None:
    """Measure a server with a streaming load: vLLM-named metrics, goodput, errors by class, validity.

    Takes servetune's flags and `vllm bench serve`'s, by their names and meanings: a `vllm bench serve` line runs
    unchanged. Exit code 1 when more requests failed than --max-error-rate allows (default 0) or when the run has
    validity warnings (unless --accept-warnings); 2 for bad options."""
    from servetune.load.bench import run_bench
    from servetune.report.bench_files import write_bench_files

    raise typer.Exit(run_bench(args, write_bench_files))


BENCH_EPILOG = (
    "vLLM flags with no effect here: "
    + ", ".join(IGNORED_FLAGS)
    + ". vLLM flags servetune does not do (an error says what to use): "
    + ", ".join(REFUSED_FLAGS)
    + "."
)


def import_runs(args: ImportArgs) -> None:
    """Copy other tools' results into a bench folder as servetune runs, for `servetune report DIR`.

    Per-request timings are kept where the file has them (vLLM --save-detailed, AIPerf's JSONL, GuideLLM's
    requests), so the report recomputes every figure with vLLM's definitions. A result already in the folder
    (the same content, whatever its file name) is skipped and named; --force imports it again."""
    from servetune.metrics.imports import import_files

    into = args.into
    done = import_files(list(args.files), into, force=args.force)
    for item in done:
        run = item.run
        if item.already:
            typer.echo(f"already imported: {run.source.path} ({run.name}) is {item.path}; --force imports it again")
        else:
            typer.echo(f"{run.source.tool:9s} {run.name:40s} {len(run.records):7,} requests  {item.path}")
    written = sum(not item.already for item in done)
    skipped = f", {len(done) - written} already there" if written < len(done) else ""
    typer.echo(f"{written} run(s) added to {into}{skipped}; draw them with `servetune report {into}`")


def mock_server(args: MockServerArgs) -> None:
    """A fast OpenAI-compatible streaming server with fixed TTFT and ITL, for measuring clients and tests."""
    from servetune.mock.server import run_mock_server

    run_mock_server(args)


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("bench", cls=ModelCommand, context_settings=PASSTHROUGH, epilog=BENCH_EPILOG)(
        model_options(BenchArgs)(bench)
    )
    app.command("import")(model_options(ImportArgs)(import_runs))
    app.command("mock-server")(model_options(MockServerArgs)(mock_server))
