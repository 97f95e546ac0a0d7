"""CLI of the simulator room: `sim-serve`, `estimate`, `calibrate` (see servetune/cli/__init__.py).

`sim-serve` and `estimate` take vLLM's own flags after the model (unknown vLLM flags are accepted and
named in the log), so a variant written for `vllm serve` runs unchanged against the simulator.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import typer

PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _vllm_log(message: str, uvicorn: bool = False) -> None:
    """Prints a line the way vLLM's logger (or uvicorn's) does, so log parsers read it unchanged."""
    if uvicorn:
        print(f"INFO:     {message}", flush=True)
    else:
        print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [sim_serve.py:1] {message}", flush=True)


def sim_serve(ctx: typer.Context) -> None:
    """Serve a simulated vLLM: OpenAI API, /metrics, vLLM's flags and startup lines (no GPU needed).

    Usage: servetune sim-serve MODEL [vLLM flags]   (MODEL: a directory with config.json, or a bundled name) [--gpu H200] [--time-scale 10] [--calibration p.json]
    """
    import asyncio

    from servetune.sim.deployment import build_deployment
    from servetune.sim.flags import parse_sim_args
    from servetune.sim.server import serve

    if any(a in ("-h", "--help") for a in ctx.args):
        typer.echo(sim_serve.__doc__)
        raise typer.Exit(0)
    args = parse_sim_args(list(ctx.args))
    dep = build_deployment(args)
    _vllm_log(
        f"servetune sim-serve (pid {os.getpid()}): simulating vLLM on {args.tensor_parallel_size}x{args.gpu}"
        f", time scale {args.time_scale}"
    )
    for line in dep.startup_lines():
        _vllm_log(line)
    try:
        asyncio.run(serve(dep, _vllm_log))
    except KeyboardInterrupt:
        pass


def _workload_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servetune estimate", add_help=False)
    p.add_argument("--num-requests", type=int, default=1000)
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--spread", type=float, default=0.0)
    p.add_argument("--shared-prefix-len", type=int, default=0)
    p.add_argument("--concurrency", type=int)
    p.add_argument("--request-rate", type=float)
    p.add_argument("--workload-seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    return p


def estimate(ctx: typer.Context) -> None:
    """Predict TTFT/TPOT/ITL/throughput of a workload on a vLLM config, offline, in seconds.

    Usage: servetune estimate MODEL [vLLM flags] --gpu H200 [--calibration p.json]
           --num-requests 1000 --input-len 1024 --output-len 256 [--spread 0.25] [--shared-prefix-len N]
           (--concurrency 64 | --request-rate 8) [--json]
    """
    from servetune.errors import ServetuneError
    from servetune.sim.deployment import build_deployment
    from servetune.sim.estimate import SimWorkload
    from servetune.sim.estimate import estimate as run_estimate
    from servetune.sim.flags import parse_sim_args

    if any(a in ("-h", "--help") for a in ctx.args):
        typer.echo(estimate.__doc__)
        raise typer.Exit(0)
    wl, rest = _workload_parser().parse_known_args(list(ctx.args))
    if wl.concurrency is None and wl.request_rate is None:
        raise ServetuneError("estimate needs a load shape", "add --concurrency N or --request-rate R")
    args = parse_sim_args(rest)
    dep = build_deployment(args)
    workload = SimWorkload(
        num_requests=wl.num_requests,
        input_len=wl.input_len,
        output_len=wl.output_len,
        spread=wl.spread,
        shared_prefix_len=wl.shared_prefix_len,
        concurrency=wl.concurrency,
        request_rate=wl.request_rate,
        seed=wl.workload_seed,
    )
    result = run_estimate(dep, workload)
    if wl.json:
        typer.echo(result.model_dump_json(indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"estimate: {workload.num_requests} requests on {args.tensor_parallel_size}x{args.gpu}")
    table.add_column("metric")
    for col in ("mean", "p50", "p90", "p99"):
        table.add_column(col, justify="right")
    for name, dist in (
        ("TTFT ms", result.ttft_ms),
        ("TPOT ms", result.tpot_ms),
        ("ITL ms", result.itl_ms),
        ("E2EL ms", result.e2el_ms),
    ):
        table.add_row(name, *(f"{getattr(dist, c):.1f}" for c in ("mean", "p50", "p90", "p99")))
    console = Console()
    console.print(table)
    console.print(
        f"output {result.output_throughput:.1f} tok/s · {result.request_throughput:.2f} req/s · "
        f"preemptions {result.num_preemptions} · prefix hit rate {result.prefix_cache_hit_rate:.1%} · "
        f"KV cache {result.kv_cache_tokens:,} tokens ({result.max_concurrency:.2f}x) · "
        f"simulated {result.duration_s:.1f} s in {result.wall_s:.2f} s ({result.speedup:.0f}x real time)"
    )


def calibrate(
    results: list[Path] = typer.Argument(..., help="Result directories of measured runs (per-point *.jsonl)."),
    out: Path = typer.Option(..., "--out", help="Where to write the calibration profile (JSON)."),
    model: str = typer.Option(
        ...,
        "--model",
        help="Model the runs served: a directory with config.json or a bundled name such as qwen3.6-27b.",
    ),
    gpu: str = typer.Option("H200", "--gpu", help="GPU the runs ran on."),
    vllm_version: str = typer.Option(None, "--vllm-version", help="vLLM release of the runs, e.g. 0.24.0."),
    points: str = typer.Option("", "--points", help="Comma-separated point names to fit on (default: all)."),
    iters: int = typer.Option(200, "--iters", help="Optimiser iterations."),
) -> None:
    """Fit the simulator's step-time coefficients to measured runs and save a calibration profile."""
    from servetune.sim.fitting import calibrate_dirs

    profile = calibrate_dirs(
        results,
        model=model,
        gpu=gpu,
        vllm_version=vllm_version,
        points=[p for p in points.split(",") if p] or None,
        iters=iters,
    )
    profile.save(out)
    typer.echo(f"calibration profile written to {out}")
    for name, errs in profile.fit_errors.items():
        typer.echo(f"  {name}: " + ", ".join(f"{k} {v:+.1%}" for k, v in errs.items()))


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("sim-serve", context_settings=PASSTHROUGH, add_help_option=False)(sim_serve)
    app.command("estimate", context_settings=PASSTHROUGH, add_help_option=False)(estimate)
    app.command("calibrate")(calibrate)
