"""What `servetune estimate` does with its arguments (`sim/args.py` `EstimateArgs`): build the simulated
deployment from MODEL and vLLM's flags, refuse a run too big to finish (records and time, before it starts), run
the load on the virtual clock, and print bench's summary, the simulator's own line and, with `--explain`, where
one class's TTFT goes. With `--compare BENCH_DIR` it replays a bench folder's runs instead and prints each load point
measured beside its simulated twin."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from servetune.errors import ServetuneError
from servetune.load.backend import ClientSpec
from servetune.load.runner import LoadResult
from servetune.metrics.export import write_jsonl
from servetune.metrics.prometheus import MetricsSnapshot, delta
from servetune.metrics.render import summary_lines
from servetune.metrics.summary import summarize
from servetune.process.interrupts import run_coroutine
from servetune.sim.args import EstimateArgs
from servetune.sim.backend import REQUESTS_PER_S, RUN_LIMIT_S, SimBackend
from servetune.sim.compare import compare, comparison_lines, twins
from servetune.sim.deployment import build_deployment
from servetune.sim.explain import explain_ttft
from servetune.sim.flags import parse_sim_args, sim_target
from servetune.sim.virtual import RunTrace


def show_config(words: list[str], allow_unknown: bool) -> None:
    """`--show-config`: the target the words name (the engine config and GPUs, as `plan --show-config` prints them)."""
    print(json.dumps(sim_target(words, allow_unknown=allow_unknown).shown(), indent=2))


def run_estimate(args: EstimateArgs) -> None:
    """`servetune estimate`."""
    words = list(args.engine_flags)
    if args.show_config:
        show_config(words, args.pass_unknown_flags)
        return
    if args.compare is not None:
        _compare(args, args.compare)
        return
    options = args.load()
    for path in (args.json_out, args.jsonl_out):
        if path and str(path) != "-" and not Path(path).parent.is_dir():
            raise ServetuneError(f"cannot write {path}: its folder does not exist", "create it first, or give another")
    sim = parse_sim_args(words, allow_unknown=args.pass_unknown_flags)
    backend = SimBackend(build_deployment(sim), client=ClientSpec(endpoint=args.endpoint))
    options.check_footprint(backend.deployment.request_floor_s, REQUESTS_PER_S, RUN_LIMIT_S)
    if args.explain is not None:
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
    to_stdout = args.json_out == "-"  # the JSON alone on standard output: everything else goes to standard error

    def out(line: str) -> None:
        print(line, file=sys.stderr if to_stdout else sys.stdout)

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
        for line in explain_ttft(backend.trace, result.records, args.explain or None).lines():
            out(line)
    if to_stdout:
        print(result.to_json())
    elif args.json_out:
        Path(args.json_out).write_text(result.to_json())
    if args.jsonl_out:
        write_jsonl(result.records, args.jsonl_out)
    if summary.failed:
        first = next(r for r in result.records if r.phase == "measure" and not r.ok)
        raise ServetuneError(
            f"{summary.failed} of {summary.failed + summary.completed} simulated requests failed: {first.error}",
            "shorten the requests or change the config (the summary above covers the completed ones)",
        )


def _compare(args: EstimateArgs, folder: Path) -> None:
    """`estimate --compare BENCH_DIR`: the folder's load points measured beside their simulated twins."""
    deployment = build_deployment(parse_sim_args(list(args.engine_flags), allow_unknown=args.pass_unknown_flags))
    points = compare(twins(folder, deployment), explain=args.explain)
    to_stdout = args.json_out == "-"

    def out(line: str) -> None:
        print(line, file=sys.stderr if to_stdout else sys.stdout)

    out(
        f"simulator: KV cache {deployment.kv_cache_tokens:,} tokens ({deployment.max_concurrency:.2f}x max_model_len);"
        f" {len(points)} load point(s) of {folder} replayed in the order they ran"
    )
    for line in comparison_lines(points, deployment.label):
        out(line)
    if args.json_out:
        text = json.dumps([p.model_dump(mode="json") for p in points], indent=2)
        if to_stdout:
            print(text)
        else:
            Path(args.json_out).write_text(text)
