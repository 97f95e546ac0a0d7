"""CLI of the simulator room: `sim-serve`, `estimate`, `calibrate` (see servetune/cli/__init__.py).

`sim-serve` and `estimate` take vLLM's own flags after the model (`sim/flags.py`: a flag it does not know is an
error with a suggestion, unless `--allow-unknown-flags`), so a variant written for `vllm serve` runs unchanged
against the simulator; `estimate` takes `servetune bench`'s load options (`load/options.py`) and prints bench's
summary.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path
from typing import NoReturn

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

    Usage: servetune sim-serve MODEL [vLLM flags] [--gpu H200x1] [--time-scale 10] [--calibration p.json]
    (MODEL: a directory with config.json, or a bundled name; an unknown flag is an error unless
    --pass-unknown-flags; --show-config prints what was understood, as `plan --show-config` does, and stops)
    """
    from servetune.process.interrupts import run_coroutine
    from servetune.sim.deployment import build_deployment
    from servetune.sim.flags import parse_sim_args
    from servetune.sim.server import serve

    if any(a in ("-h", "--help") for a in ctx.args):
        typer.echo(sim_serve.__doc__)
        raise typer.Exit(0)
    if _show_config(list(ctx.args)):
        return
    args = parse_sim_args(list(ctx.args))
    dep = build_deployment(args)
    _vllm_log(
        f"servetune sim-serve (pid {os.getpid()}): simulating vLLM on {args.tensor_parallel_size}x{args.gpu}"
        f", time scale {args.time_scale}"
    )
    for line in dep.startup_lines():
        _vllm_log(line)
    with contextlib.suppress(KeyboardInterrupt):
        run_coroutine(serve(dep, _vllm_log))


ESTIMATE_ALIASES = {
    "--num-requests": "requests",
    "--shared-prefix-len": "prefix_tokens",
    "--workload-seed": "seed",
    "--spread": "range_ratio",
}
"""estimate's flags of servetune 0.1, still read (bench's names are the ones documented; its 0.1 spellings
`--input-len`, `--output-len` and `--request-rate` are vLLM bench serve's, read by `LoadOptions` itself)."""


def _estimate_parser() -> argparse.ArgumentParser:
    """estimate's own options besides bench's load options and vLLM's flags."""
    from servetune.errors import ServetuneError

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise ServetuneError(f"servetune estimate: {message}", "see `servetune estimate --help`")

    p = Parser(prog="servetune estimate", add_help=False, allow_abbrev=False)
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    p.add_argument("--json", nargs="?", const="-", dest="json_out")
    p.add_argument("--jsonl", dest="jsonl_out")
    p.add_argument("--explain", nargs="?", const="", default=None, metavar="CLASS")
    p.add_argument("--compare", default=None, metavar="BENCH_DIR")
    return p


def _estimate_help() -> str:
    from servetune.load.options import LoadOptions

    lines = [
        "Predict a workload's latency and throughput on a vLLM config, offline, in seconds.",
        "",
        "Usage: servetune estimate MODEL [vLLM flags] [--gpu H200x1] [--calibration p.json]",
        "       (--concurrency N | --rate R) [load options] [--endpoint completions|chat]",
        "       [--json [PATH]] [--jsonl PATH] [--explain [CLASS]]",
        "       servetune estimate MODEL [vLLM flags] --compare BENCH_DIR [--explain [CLASS]] [--json [PATH]]",
        "",
        "Prints the summary `servetune bench` prints, in simulated time; --json writes bench's LoadResult JSON",
        "(to stdout when no PATH is given), --jsonl every simulated request's record. --explain splits the mean",
        "TTFT of one request class (default: the first) into API server, queue, prefill steps, mixed steps,",
        "waits between chunks and the first token's hand-over, so a slow prediction says why.",
        "--compare BENCH_DIR replays the runs `servetune bench --save-result` kept there on the simulator (their",
        "own requests and load, in order) and prints each load point measured beside simulated: TTFT p50/p99,",
        "TPOT p50, output tok/s, and the TTFT's parts (queue, prefill, API server, HTTP) from the engine's own",
        "/metrics on both sides; with --explain, each point's parts and the simulator's finer split too.",
        "",
        "Load options (the same as servetune bench's, vLLM bench serve's names included):",
        *LoadOptions.help_lines(),
        "",
        "Older spellings still read: "
        + ", ".join(f"{a} (= --{f.replace('_', '-')})" for a, f in ESTIMATE_ALIASES.items()),
        "",
        "vLLM flags by vLLM's names (e.g. -tp 2, --max-model-len 128K, --max-num-seqs 64), plus --gpu NAME[xN],",
        "--calibration, --acceptance-rate, --vllm-version. --seed is the workload's (as in bench). An unknown flag",
        "is an error; --pass-unknown-flags simulates without it. --show-config prints what was understood (the",
        "engine config and GPUs, as `plan --show-config` prints them) and stops.",
    ]
    return "\n".join(lines)


def _show_config(words: list[str]) -> bool:
    """`--show-config`: prints the target the words name (the engine config and GPUs, as `plan --show-config`
    prints them) and says the command should stop there."""
    if "--show-config" not in words:
        return False
    import json

    from servetune.sim.flags import sim_target

    typer.echo(json.dumps(sim_target([w for w in words if w != "--show-config"]).shown(), indent=2))
    return True


def estimate(ctx: typer.Context) -> None:
    """Predict TTFT/TPOT/ITL/throughput of a workload on a vLLM config, offline, in seconds (see --help)."""
    from servetune.errors import ServetuneError
    from servetune.load.backend import ClientSpec
    from servetune.load.options import LoadOptions
    from servetune.load.runner import LoadResult
    from servetune.metrics.export import write_jsonl
    from servetune.metrics.prometheus import MetricsSnapshot, delta
    from servetune.metrics.render import summary_lines
    from servetune.metrics.summary import summarize
    from servetune.process.interrupts import run_coroutine
    from servetune.sim.backend import REQUESTS_PER_S, RUN_LIMIT_S, SimBackend
    from servetune.sim.deployment import build_deployment
    from servetune.sim.explain import explain_ttft
    from servetune.sim.flags import parse_sim_args
    from servetune.sim.virtual import RunTrace

    if any(a in ("-h", "--help") for a in ctx.args):
        typer.echo(_estimate_help())
        raise typer.Exit(0)
    own, rest = _estimate_parser().parse_known_args(list(ctx.args))
    options, sim_words = LoadOptions.from_argv(rest, aliases=ESTIMATE_ALIASES)
    if _show_config(sim_words):
        return
    if own.compare is not None:
        _compare(own, rest, sim_words)
        return
    rest = sim_words
    args = parse_sim_args(rest)
    for path in (own.json_out, own.jsonl_out):
        if path and path != "-" and not Path(path).parent.is_dir():
            raise ServetuneError(f"cannot write {path}: its folder does not exist", "create it first, or give another")
    backend = SimBackend(build_deployment(args), client=ClientSpec(endpoint=own.endpoint))
    options.check_footprint(backend.deployment.request_floor_s, REQUESTS_PER_S, RUN_LIMIT_S)
    if own.explain is not None:
        backend.trace = RunTrace()
    wall0, cpu0 = time.perf_counter(), time.process_time()

    async def run() -> tuple[MetricsSnapshot | None, LoadResult, MetricsSnapshot | None]:
        before = await backend.scrape()
        result = await backend.run(options.workload(), options.shape())
        return before, result, await backend.scrape()

    before, result, after = run_coroutine(run())
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    summary = summarize(result.records, slos=options.slos(), percentiles=options.percentile_values())
    result = result.model_copy(update={"summary": summary})
    out = typer.echo if own.json_out != "-" else lambda line: typer.echo(line, err=True)
    for line in summary_lines(summary, f"{backend.model} on {backend.label} — {options.level}"):
        out(line)
    dep, d = backend.deployment, delta(before, after) if before and after else None
    hit = d.prefix_cache_hit_rate if d else None
    out(
        f"simulator: KV cache {dep.kv_cache_tokens:,} tokens ({dep.max_concurrency:.2f}x max_model_len); "
        f"preemptions {int(d.num_preemptions or 0) if d else 0}; prefix-cache hit rate "
        f"{'-' if hit is None else f'{hit:.1%}'}; {result.wall_s:,.1f} simulated s in {wall:.2f} s "
        f"(CPU {cpu:.2f} s, {result.wall_s / max(wall, 1e-9):,.0f}x real time)"
    )
    if backend.trace is not None:
        for line in explain_ttft(backend.trace, result.records, own.explain or None).lines():
            out(line)
    if own.json_out == "-":
        typer.echo(result.to_json())
    elif own.json_out:
        Path(own.json_out).write_text(result.to_json())
    if own.jsonl_out:
        write_jsonl(result.records, own.jsonl_out)
    if summary.failed:
        first = next(r for r in result.records if r.phase == "measure" and not r.ok)
        raise ServetuneError(
            f"{summary.failed} of {summary.failed + summary.completed} simulated requests failed: {first.error}",
            "shorten the requests or change the config (the summary above covers the completed ones)",
        )


def _compare(own: argparse.Namespace, words: list[str], sim_words: list[str]) -> None:
    """`estimate --compare BENCH_DIR`: the folder's load points measured beside their simulated twins."""
    from servetune.errors import ServetuneError
    from servetune.sim.compare import compare, comparison_lines, twins
    from servetune.sim.deployment import build_deployment
    from servetune.sim.flags import parse_sim_args

    if len(sim_words) != len(words):
        given = [w for w in words if w.startswith("-") and w not in sim_words]
        raise ServetuneError(
            f"--compare replays the load the bench folder's runs ran; {', '.join(given)} would change it",
            "drop the load options (or run estimate without --compare)",
        )
    deployment = build_deployment(parse_sim_args(sim_words))
    points = compare(twins(Path(own.compare), deployment), explain=own.explain)
    out = typer.echo if own.json_out != "-" else lambda line: typer.echo(line, err=True)
    out(
        f"simulator: KV cache {deployment.kv_cache_tokens:,} tokens ({deployment.max_concurrency:.2f}x max_model_len);"
        f" {len(points)} load point(s) of {own.compare} replayed in the order they ran"
    )
    for line in comparison_lines(points, deployment.label):
        out(line)
    if own.json_out:
        import json

        text = json.dumps([p.model_dump(mode="json") for p in points], indent=2)
        if own.json_out == "-":
            typer.echo(text)
        else:
            Path(own.json_out).write_text(text)


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
    iters: int = typer.Option(200, "--iters", min=1, max=100_000, help="Optimiser iterations (1 to 100,000)."),
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
