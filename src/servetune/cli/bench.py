"""CLI of the load room: `servetune bench` (load generator; its options are `load/bench_args.py` `BenchArgs`,
its run `load/bench.py`), `servetune import` and `servetune mock-server`.

Heavy imports (the load path, rich) happen inside the commands so that `servetune --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from servetune.cli.model_options import PASSTHROUGH, ModelCommand, model_options
from servetune.errors import ServetuneError
from servetune.load.bench_args import IGNORED_FLAGS, REFUSED_FLAGS, BenchArgs


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
    app.command("bench", cls=ModelCommand, context_settings=PASSTHROUGH, epilog=BENCH_EPILOG)(
        model_options(BenchArgs)(bench)
    )
    app.command("import")(import_runs)
    app.command("mock-server")(mock_server)
