"""CLI of the load room: `servetune bench` (load generator) and `servetune mock-server`.

Heavy imports (the load path, rich) happen inside the commands so that `servetune --help` stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from servetune.errors import ServetuneError

if TYPE_CHECKING:
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Workload
    from servetune.metrics.summary import Summary

T = TypeVar("T")


def bench(
    url: str = typer.Option(..., "--url", help="Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000"),
    model: str = typer.Option(..., "--model", help="Model name the server serves"),
    endpoint: str = typer.Option("completions", help="completions or chat"),
    stream: bool = typer.Option(True, "--stream/--no-stream"),
    api_key: str | None = typer.Option(None, envvar="OPENAI_API_KEY", help="Bearer token"),
    extra_body: str | None = typer.Option(None, help="JSON merged into every request, e.g. '{\"temperature\":0}'"),
    tokenizer: str | None = typer.Option(None, help="tokenizer.json path or model dir, 'server' (/tokenize), 'words'"),
    input_tokens: int = typer.Option(256, help="Input tokens per request (exact with a tokenizer)"),
    output_tokens: int = typer.Option(128, help="Output tokens per request"),
    output_std: float = typer.Option(0.0, help="Output length standard deviation (normal distribution); 0 = fixed"),
    range_ratio: float = typer.Option(0.0, help="Input and output lengths uniform in [1-r, 1+r] x the given ones"),
    prefix_tokens: int = typer.Option(0, help="Shared prefix tokens (a long system prompt), counted in input-tokens"),
    prefix_groups: int = typer.Option(1, help="Number of different shared prefixes"),
    turns: int = typer.Option(1, help="Turns per conversation (multi-turn)"),
    mix: str | None = typer.Option(None, help="Traffic mix name:weight:in:out,... (overrides input/output tokens)"),
    dataset: Path | None = typer.Option(None, help="Requests from a JSONL or ShareGPT JSON file"),
    output_control: str = typer.Option("ignore_eos", help="ignore_eos, min_tokens or none"),
    seed: int = typer.Option(0),
    concurrency: int | None = typer.Option(None, help="Closed loop: requests in flight"),
    rate: float | None = typer.Option(None, help="Open loop: requests per second (inf: all at once)"),
    arrival: str = typer.Option("poisson", help="poisson, gamma or constant"),
    burstiness: float = typer.Option(1.0, help="Gamma shape (1 = Poisson, <1 burstier)"),
    max_concurrency: int | None = typer.Option(None, help="Cap on requests in flight (open loop)"),
    requests: int | None = typer.Option(None, help="Measured requests (default 100)"),
    duration: float | None = typer.Option(None, help="Measured seconds"),
    warmup_requests: int = typer.Option(0),
    warmup_s: float = typer.Option(0.0),
    cooldown_s: float = typer.Option(0.0),
    sweep: str | None = typer.Option(
        None, help="Concurrencies or rates to sweep, e.g. 1,2,4,8,16 (stops at saturation)"
    ),
    connect_timeout: float = typer.Option(10.0),
    first_token_timeout: float = typer.Option(600.0),
    inter_token_timeout: float = typer.Option(120.0),
    goodput: str | None = typer.Option(None, help="SLOs in ms, vLLM syntax: 'ttft:500 tpot:50 e2el:10000'"),
    percentiles: str = typer.Option("50,90,95,99"),
    json_out: Path | None = typer.Option(None, "--json", help="Write the summary (and config) as JSON"),
    jsonl_out: Path | None = typer.Option(None, "--jsonl", help="Write every request's record as JSONL"),
    csv_out: Path | None = typer.Option(
        None, "--csv", help="Write per-request rows as CSV (a sweep: one row per level)"
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    max_error_rate: float = typer.Option(
        0.0, "--max-error-rate", help="Failed share of requests (0..1) above which bench exits 1; 0 for a benchmark."
    ),
    accept_warnings: bool = typer.Option(
        False, "--accept-warnings", help="Exit 0 despite validity warnings (short answers, a saturated client...)."
    ),
    workers: int | None = typer.Option(
        None, help="Client processes sending the load (1: in process; default: one per 32 streams, up to CPUs - 1)"
    ),
) -> None:
    """Measure a server with a streaming load: vLLM-named metrics, goodput, errors by class, validity.

    Exit code 1 when more requests failed than --max-error-rate allows (default 0: any failed request fails a
    benchmark) or when the run has validity warnings (unless --accept-warnings); 2 for bad options."""
    from servetune.load.options import LoadOptions, number_list

    if not 0 <= max_error_rate <= 1:
        raise ServetuneError(f"--max-error-rate {max_error_rate} is not a fraction", "give 0..1, e.g. 0.01 for 1%")
    if endpoint not in ("completions", "chat"):
        raise ServetuneError(f"unknown endpoint {endpoint!r}", "use --endpoint completions or --endpoint chat")
    options = LoadOptions.parse(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        output_std=output_std,
        range_ratio=range_ratio,
        prefix_tokens=prefix_tokens,
        prefix_groups=prefix_groups,
        turns=turns,
        mix=mix,
        dataset=dataset,
        output_control=output_control,
        seed=seed,
        concurrency=concurrency,
        rate=rate,
        arrival=arrival,
        burstiness=burstiness,
        max_concurrency=max_concurrency,
        requests=requests,
        duration=duration,
        warmup_requests=warmup_requests,
        warmup_s=warmup_s,
        cooldown_s=cooldown_s,
        connect_timeout=connect_timeout,
        first_token_timeout=first_token_timeout,
        inter_token_timeout=inter_token_timeout,
        goodput=goodput,
        percentiles=percentiles,
    )
    body = None
    if extra_body:
        try:
            body = json.loads(extra_body)
        except ValueError as err:
            raise ServetuneError(
                f"--extra-body is not JSON: {err}", "e.g. --extra-body '{\"temperature\": 0}'"
            ) from None
        if not isinstance(body, dict):
            raise ServetuneError("--extra-body must be a JSON object", "e.g. --extra-body '{\"temperature\": 0}'")
    workload, shape = options.workload(), options.shape()
    kwargs = dict(
        endpoint=endpoint,
        stream=stream,
        api_key=api_key,
        extra_body=body,
        tokenizer=tokenizer,
        slos=options.slos(),
        percentiles=options.percentile_values(),
        workers=workers,
    )
    if sweep:
        levels = number_list(sweep, "sweep")
        if not levels or any(v <= 0 for v in levels):
            raise ServetuneError(f"--sweep {sweep!r}: levels must be positive", "e.g. --sweep 1,2,4,8")
        summaries = _sweep(url, model, workload, shape, levels, kwargs, json_out, csv_out, progress)
    else:
        summaries = [_single(url, model, workload, shape, kwargs, json_out, jsonl_out, csv_out, progress)]
    _verdict(summaries, max_error_rate, accept_warnings)


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


def _single(
    url: str,
    model: str,
    workload: Workload,
    shape: LoadShape,
    kwargs: dict[str, Any],
    json_out: Path | None,
    jsonl_out: Path | None,
    csv_out: Path | None,
    progress: bool,
) -> Summary:
    from servetune.load.runner import run_load
    from servetune.metrics.export import write_jsonl, write_requests_csv

    result = _run(run_load(url, model, workload, shape, progress=progress, **kwargs))
    level = f"concurrency {shape.concurrency}" if shape.kind == "concurrency" else f"rate {shape.rate:g}/s"
    _print_summary(result.summary, f"{model} @ {url} — {level}")
    if json_out:
        json_out.write_text(result.to_json())
    if jsonl_out:
        write_jsonl(result.records, jsonl_out)
    if csv_out:
        write_requests_csv(result.records, csv_out)
    return result.summary


def _sweep(
    url: str,
    model: str,
    workload: Workload,
    shape: LoadShape,
    levels: list[float],
    kwargs: dict[str, Any],
    json_out: Path | None,
    csv_out: Path | None,
    progress: bool,
) -> list[Summary]:
    from servetune.load.sweep import run_sweep
    from servetune.metrics.export import summary_row, write_summary_csv
    from servetune.metrics.render import summary_lines

    result = _run(run_sweep(url, model, workload, shape, levels, progress=progress, **kwargs))
    typer.echo(
        f"{'level':>8}{'req/s':>10}{'out tok/s':>12}{'p50 ttft':>10}{'p99 ttft':>10}{'p50 tpot':>10}{'failed':>8}"
    )
    for p in result.points:
        s = p.result.summary
        typer.echo(
            f"{p.level:>8g}{s.request_throughput:>10.2f}{s.output_throughput:>12.1f}{s.ttft_ms.p50 or 0:>10.1f}"
            f"{s.ttft_ms.p99 or 0:>10.1f}{s.tpot_ms.p50 or 0:>10.2f}{s.failed:>8}"
        )
        for line in summary_lines(s)[1:]:
            if line.startswith("WARNING"):
                typer.secho(f"   {line}", fg="yellow")
    if result.saturated_at is not None:
        typer.echo(f"saturated at {result.saturated_at:g}: {result.reason}")
    if json_out:
        json_out.write_text(result.to_json())
    if csv_out:
        write_summary_csv(
            [summary_row(p.result.summary, level=p.level, kind=shape.kind) for p in result.points], csv_out
        )
    # The level the sweep stopped at is saturated by definition (its failures are what stopped it): the verdict
    # judges the levels before it.
    return [p.result.summary for p in result.points if p.level != result.saturated_at]


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
    reuse_port: bool = typer.Option(False, help="Share the port with other mock servers (SO_REUSEPORT: one per core)"),
    api_key: str | None = typer.Option(None, help="Require this bearer token on /v1/ routes"),
) -> None:
    """A fast OpenAI-compatible streaming server with fixed TTFT and ITL, for measuring clients and tests."""
    import asyncio

    from servetune.mock.config import Fault, MockConfig
    from servetune.mock.server import serve_forever

    config = MockConfig(
        model=model, ttft_ms=ttft_ms, itl_ms=itl_ms, output_tokens=output_tokens, reasoning_tokens=reasoning_tokens,
        precise=precise, api_key=api_key, faults=tuple(Fault.parse(f) for f in fault),
    )  # fmt: skip

    def ready(bound: int) -> None:
        typer.echo(
            f"mock server ready on http://{host}:{bound} (model {model}, ttft {ttft_ms} ms, itl {itl_ms} ms)", err=True
        )

    coro = serve_forever(config, host, port, ready, reuse_port)
    try:
        if uvloop:
            import uvloop as _uvloop

            _uvloop.run(coro)
        else:
            asyncio.run(coro)
    except KeyboardInterrupt:
        pass
    except OSError as err:
        raise ServetuneError(f"cannot listen on {host}:{port}: {err}", "pick a free port with --port") from None


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("bench")(bench)
    app.command("mock-server")(mock_server)
