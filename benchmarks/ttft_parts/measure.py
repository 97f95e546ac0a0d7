"""The load points of the TTFT-parts measurement, against a vLLM already serving (`device.sh` starts it).

    python3 measure.py --url http://127.0.0.1:8000 --model m --tokenizer DIR/tokenizer.json --out DIR --deadline S

Runs as a file on the device (servetune's source on PYTHONPATH, no typer there): each point is built from a
`servetune bench` command line by bench's own parser, run by `run_load` (which keeps vLLM's split of the point's
TTFT: queue, prefill, API server, HTTP, with the running/waiting gauges sampled) and written by bench's own
writers, so `OUT/bench` is exactly the folder `servetune bench ... --save-result --result-dir OUT/bench` writes —
what `servetune estimate MODEL [flags] --compare OUT/bench` replays. vLLM's raw `/metrics` before and after every
point go to `OUT/prom` (gzip) for the later per-part fit (bucket counts, tokens per iteration), the plan and what
ran to `OUT/plan.json`, one line per point to `OUT/summary.txt`. A point that would end after `--deadline` (epoch
seconds) is skipped and said so; a warm-up point first (kernel autotuning after a start: not kept in the folder).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from pathlib import Path

from servetune.cli.model_options import parse_words
from servetune.control.client import ControlClient, ControlError
from servetune.engines.models import resolve_tokenizer
from servetune.load.bench_args import BenchArgs
from servetune.load.runner import LoadResult, run_load
from servetune.report.bench_files import bench_runs, write_bench_outputs

POINTS: list[dict] = [
    # name, bench's load flags, an estimate of its seconds on the H200 (Qwen2-7B) for the deadline rule
    {"name": "warmup", "argv": "--concurrency 8 --requests 32 --input-tokens 512 --output-tokens 32", "est_s": 10},
    {"name": "c1", "argv": "--concurrency 1 --requests 16 --warmup-requests 2 --input-tokens 1024 --output-tokens 64",
     "est_s": 15},
    {"name": "c16", "argv": "--concurrency 16 --requests 64 --warmup-requests 16 --input-tokens 1024 "
     "--output-tokens 128", "est_s": 15},
    {"name": "c64", "argv": "--concurrency 64 --requests 192 --warmup-requests 64 --input-tokens 1024 "
     "--output-tokens 128", "est_s": 20},
    {"name": "burst", "argv": "--rate inf --requests 128 --input-tokens 2048 --output-tokens 32", "est_s": 15},
]  # fmt: skip
"""A closed loop from one stream to well past the default token budget, and a burst (admission under the budget):
the queue, prefill and API server parts each dominate somewhere. Each point has its own seed (no prefix-cache hit
from an earlier point)."""
SCALED = ("--requests", "--warmup-requests", "--input-tokens", "--output-tokens")


def _argv(point: dict, seed: int, scale: float, token_scale: float) -> list[str]:
    words = point["argv"].split()
    for i, word in enumerate(words[:-1]):
        if word in SCALED:
            factor = token_scale if "tokens" in word else scale
            words[i + 1] = str(max(1, round(int(words[i + 1]) * factor)))
    return [*words, "--seed", str(seed)]


async def _metrics(url: str) -> str | None:
    try:
        async with ControlClient(url) as control:
            return await control.metrics_text()
    except ControlError:
        return None


async def _point(url: str, model: str, argv: list[str], out: Path, name: str, timeout_s: float) -> LoadResult:
    args = parse_words(BenchArgs, ["--url", url, "--model", model, *argv])
    before = await _metrics(url)
    result = await asyncio.wait_for(
        run_load(
            url, model, args.workload(), args.shape(), endpoint=args.api, stream=args.stream,
            extra_body=args.body, tokenizer=resolve_tokenizer(args.tokenizer), workers=args.workers,
        ),
        timeout_s,
    )  # fmt: skip
    after = await _metrics(url)
    for when, text in (("before", before), ("after", after)):
        if text is not None:
            (out / "prom" / f"{name}.metrics.{when}.prom.gz").write_bytes(gzip.compress(text.encode()))
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True)
    p.add_argument("--model", default="m")
    p.add_argument("--tokenizer", required=True, help="tokenizer.json: exact prompt lengths")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--deadline", type=float, required=True, help="epoch seconds: start nothing that ends later")
    p.add_argument("--ready-s", type=float, default=None, help="launch to ready (recorded)")
    p.add_argument("--scale", type=float, default=1.0, help="request counts x this (a CPU rehearsal: 0.25)")
    p.add_argument("--token-scale", type=float, default=1.0, help="token lengths x this (a CPU rehearsal: 0.25)")
    p.add_argument("--label", default="qwen2-7b")
    a = p.parse_args()
    (a.out / "prom").mkdir(parents=True, exist_ok=True)
    (a.out / "bench").mkdir(exist_ok=True)
    plan = {"url": a.url, "ready_s": a.ready_s, "scale": a.scale, "token_scale": a.token_scale, "points": []}
    lines = []
    for seed, point in enumerate(POINTS, start=100):
        argv = [*_argv(point, seed, a.scale, a.token_scale), "--tokenizer", a.tokenizer, "--label", a.label]
        entry = {"name": point["name"], "argv": argv}
        plan["points"].append(entry)
        left = a.deadline - time.time()
        if left < 2 * point["est_s"]:
            entry["skipped"] = f"{left:.0f} s left, estimated {point['est_s']} s (x2 margin)"
            print(f"{point['name']}: skipped ({entry['skipped']})", flush=True)
            continue
        t0 = time.time()
        try:
            result = asyncio.run(_point(a.url, a.model, argv, a.out, point["name"], left - 5))
        except Exception as err:  # noqa: BLE001 - a lost point (a timeout included) is recorded; the others are kept
            entry["failed"] = f"{type(err).__name__}: {err}"
            print(f"{point['name']}: failed ({entry['failed']})", flush=True)
            continue
        entry["wall_s"] = round(time.time() - t0, 1)
        split = result.engine_time
        s = result.summary
        line = (
            f"{point['name']:>7}: {s.completed} done, {s.failed} failed; TTFT p50 {s.ttft_ms.p50 or 0:,.1f} p99 "
            f"{s.ttft_ms.p99 or 0:,.1f} ms; TPOT p50 {s.tpot_ms.p50 or 0:,.2f} ms; {s.output_throughput:,.0f} tok/s; "
            + (split.lines()[0] if split is not None else "no engine split")
        )
        print(line, flush=True)
        lines.append(line)
        if point["name"] == "warmup":
            continue
        args = parse_words(
            BenchArgs,
            ["--url", a.url, "--model", a.model, *argv, "--save-result", "--result-dir", str(a.out / "bench")],
        )
        write_bench_outputs(args, args, bench_runs(args, args, a.model, [result]), [result])
    (a.out / "plan.json").write_text(json.dumps(plan, indent=1))
    (a.out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
