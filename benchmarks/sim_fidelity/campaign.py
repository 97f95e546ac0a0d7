"""Measures real vLLM at the simulator's fidelity points and writes what `fit_and_score.py` reads.

Runs on the device machine (python3.12, PYTHONPATH=/tmp/site:src: vLLM's dependencies and servetune's
source only), against the server that `vllm_up.sh` started:

    python3 benchmarks/sim_fidelity/campaign.py --setting A --out "$OUT/A"

The client is servetune's own (`servetune.load.runner.run_load`, exact input lengths from the model
directory's tokenizer or the server's /tokenize, `ignore_eos` so each request gets exactly its
max_tokens); it needs only aiohttp, pydantic and numpy, which vLLM brings. Each point first runs its own
warm-up requests (recorded apart), then its measured requests. Written under --out:

    campaign.json                 the points, the client used, the server's /v1/models, start/end times
    <point>.jsonl                 one record per measured request (sent_ns, chunk_ns, done_ns/end_ns, tokens)
    warmup/<point>.jsonl          the warm-up requests' records
    <point>.summary.json          TTFT/TPOT/ITL/E2EL percentiles (ms) and throughputs, vLLM's definitions
    <point>.metrics.before.prom   /metrics right before the measured requests
    <point>.metrics.after.prom    /metrics right after them
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # device_campaign.sh runs it as a script on the device: its siblings by path

from fidelity_points import POINTS, FidelityPoint  # noqa: E402
from fidelity_records import summarize  # noqa: E402


async def fetch_text(session, url: str) -> str:
    async with session.get(url) as resp:
        return await resp.text()


async def servetune_point(
    base: str, model: str, point: FidelityPoint, seed: int, warmup: bool, tokenizer: str | None
) -> list[dict]:
    """servetune's own client: `run_load` at the point's closed-loop concurrency."""
    from servetune.load.runner import run_load
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Dist, Workload

    def dist(nominal: int) -> int | Dist:
        if not point.spread:
            return nominal
        return Dist(kind="uniform", mean=nominal, std=point.spread * nominal / 3**0.5)

    if warmup:
        workload = Workload.synthetic(point.warmup_prompt, point.warmup_output, seed=seed + 1)
        n = point.warmup_requests
    else:
        workload = Workload.synthetic(dist(point.prompt_tokens), dist(point.output_tokens), seed=seed)
        n = point.num_requests
    shape = LoadShape(kind="concurrency", concurrency=point.concurrency, requests=n)
    result = await run_load(base, model, workload, shape, tokenizer=tokenizer, extra_body={"temperature": 0.0})
    return [dict(json.loads(r.model_dump_json()), concurrency=point.concurrency) for r in result.records]


async def run_point(session, args: argparse.Namespace, point: FidelityPoint, out: Path) -> dict:
    async def measure(warmup: bool) -> list[dict]:
        return await servetune_point(args.base_url, args.model, point, args.seed, warmup, args.tokenizer)

    t0 = time.time()
    warm = await measure(True)
    (out / f"{point.name}.metrics.before.prom").write_text(await fetch_text(session, f"{args.base_url}/metrics"))
    records = await measure(False)
    (out / f"{point.name}.metrics.after.prom").write_text(await fetch_text(session, f"{args.base_url}/metrics"))
    (out / "warmup").mkdir(exist_ok=True)
    for path, recs in ((out / "warmup" / f"{point.name}.jsonl", warm), (out / f"{point.name}.jsonl", records)):
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = summarize(records)
    summary.update(
        point=point.name, concurrency=point.concurrency, client="servetune", wall_s=round(time.time() - t0, 2)
    )
    (out / f"{point.name}.summary.json").write_text(json.dumps(summary, indent=1))
    return summary


async def main_async(args: argparse.Namespace) -> None:
    import aiohttp

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    points = [p for p in POINTS if not args.only or p.name in args.only.split(",")]
    if args.scale != 1.0:
        points = [p.scaled(args.scale) for p in points]
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        models = json.loads(await fetch_text(session, f"{args.base_url}/v1/models"))
        manifest = {
            "setting": args.setting,
            "started": time.time(),
            "models": models,
            "client": "servetune",
            "points": [asdict(p) for p in points],
            "summaries": [],
        }
        for point in points:
            summary = await run_point(session, args, point, out)
            manifest["summaries"].append(summary)
            print(
                json.dumps(
                    {
                        k: summary.get(k)
                        for k in (
                            "point",
                            "completed",
                            "failed",
                            "ttft_ms_p50",
                            "tpot_ms_p50",
                            "output_throughput",
                            "wall_s",
                        )
                    }
                ),
                flush=True,
            )
            (out / "campaign.json").write_text(json.dumps(manifest, indent=1))
        manifest["ended"] = time.time()
        (out / "campaign.json").write_text(json.dumps(manifest, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setting", required=True, help="flag-setting label (A, B, ...)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--base-url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated point names")
    ap.add_argument("--scale", type=float, default=1.0, help="scale request counts (smoke runs)")
    ap.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer.json or model dir for exact prompt lengths (default: the server's /tokenize)",
    )
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
