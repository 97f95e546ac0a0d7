"""Measures real vLLM at the simulator's fidelity points and writes what `fit_and_score.py` reads.

Runs on the device machine (python3.12, PYTHONPATH=/tmp/site:src: vLLM's dependencies and servetune's
source only), against the server that `vllm_up.sh` started:

    python3 benchmarks/sim_fidelity/campaign.py --setting A --out "$OUT/A"

The client is servetune's own (`servetune.load.runner.run_load`, exact input lengths from the model
directory's tokenizer or the server's /tokenize, `ignore_eos` so each request gets exactly its
max_tokens). Should that client fail to import or to run on the device, a minimal built-in aiohttp client
takes over (token-id prompts, same record fields); campaign.json says which one measured. Each point
first runs its own warm-up requests (recorded apart), then its measured requests. Written under --out:

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
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fidelity_points import POINTS, FidelityPoint  # noqa: E402
from fidelity_records import summarize  # noqa: E402


@dataclass
class Record:
    """One request as measured by this client (monotonic ns; the fields fit_and_score.py reads)."""

    point: str
    index: int
    warmup: bool
    concurrency: int
    prompt_tokens: int
    max_tokens: int
    sent_ns: int
    chunk_ns: list[int]
    chunk_tokens: list[int]
    end_ns: int
    output_tokens: int
    usage_prompt_tokens: int
    finish_reason: str | None
    status: int
    error: str | None


def prompt_ids(rng: random.Random, n: int) -> list[int]:
    """Random ids inside the local 32k tokenizer's vocabulary (special tokens avoided)."""
    return [rng.randrange(1000, 30000) for _ in range(n)]


async def one_request(session, url: str, model: str, point: FidelityPoint, index: int, warmup: bool,
                      ids: list[int], max_tokens: int) -> Record:
    body = {
        "model": model, "prompt": ids, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0.0,
        "stream": True, "stream_options": {"include_usage": True},
    }
    chunk_ns: list[int] = []
    chunk_tokens: list[int] = []
    usage: dict = {}
    finish = None
    err = None
    status = 0
    sent = time.monotonic_ns()
    try:
        async with session.post(url, json=body) as resp:
            status = resp.status
            if resp.status != 200:
                err = (await resp.text())[:300]
            else:
                buf = b""
                async for data in resp.content.iter_any():
                    now = time.monotonic_ns()
                    buf += data
                    while b"\n\n" in buf:
                        event, buf = buf.split(b"\n\n", 1)
                        for line in event.split(b"\n"):
                            if not line.startswith(b"data:"):
                                continue
                            payload = line[5:].strip()
                            if payload == b"[DONE]":
                                continue
                            msg = json.loads(payload)
                            if "error" in msg:
                                err = json.dumps(msg["error"])[:300]
                            if msg.get("usage"):
                                usage = msg["usage"]
                            for ch in msg.get("choices") or []:
                                if ch.get("finish_reason"):
                                    finish = ch["finish_reason"]
                                if ch.get("text"):
                                    chunk_ns.append(now)
                                    chunk_tokens.append(1)
    except Exception as exc:  # noqa: BLE001 - a measurement records every failure and goes on
        err = f"{type(exc).__name__}: {exc}"
    end = time.monotonic_ns()
    out = int(usage.get("completion_tokens", sum(chunk_tokens)))
    # A streamed chunk may carry several tokens (speculative decoding): spread usage over chunks.
    if chunk_tokens and out != len(chunk_tokens):
        chunk_tokens = [out // len(chunk_tokens)] * len(chunk_tokens)
        chunk_tokens[-1] += out - sum(chunk_tokens)
    return Record(point.name, index, warmup, point.concurrency, len(ids), max_tokens, sent, chunk_ns,
                  chunk_tokens, end, out, int(usage.get("prompt_tokens", 0)), finish, status, err)


async def closed_loop(session, url, model, point: FidelityPoint, jobs: list[tuple[int, list[int], int]],
                      warmup: bool, concurrency: int) -> list[Record]:
    """Keeps `concurrency` requests in flight; the next job starts when one finishes."""
    queue = list(reversed(jobs))
    out: list[Record] = []

    async def worker() -> None:
        while queue:
            index, ids, max_tokens = queue.pop()
            out.append(await one_request(session, url, model, point, index, warmup, ids, max_tokens))

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(jobs)))))
    return sorted(out, key=lambda r: r.index)


async def fetch_text(session, url: str) -> str:
    async with session.get(url) as resp:
        return await resp.text()


async def builtin_point(session, base: str, model: str, point: FidelityPoint, seed: int, warmup: bool) -> list[dict]:
    """The fallback client: token-id prompts over aiohttp."""
    rng = random.Random(f"{seed}-{point.name}-{'w' if warmup else 'm'}")
    url = f"{base}/v1/completions"
    if warmup:
        jobs = [(i, prompt_ids(rng, point.warmup_prompt), point.warmup_output) for i in range(point.warmup_requests)]
    else:
        jobs = [(i, prompt_ids(rng, p), o) for i, (p, o) in enumerate(point.lengths(rng))]
    return [asdict(r) for r in await closed_loop(session, url, model, point, jobs, warmup, point.concurrency)]


async def servetune_point(base: str, model: str, point: FidelityPoint, seed: int, warmup: bool,
                          tokenizer: str | None) -> list[dict]:
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
    result = await run_load(base, model, workload, shape, tokenizer=tokenizer,
                            extra_body={"temperature": 0.0})
    return [dict(json.loads(r.model_dump_json()), concurrency=point.concurrency) for r in result.records]


async def run_point(session, args: argparse.Namespace, point: FidelityPoint, out: Path, client: str) -> dict:
    async def measure(warmup: bool) -> list[dict]:
        if client == "servetune":
            return await servetune_point(args.base_url, args.model, point, args.seed, warmup, args.tokenizer)
        return await builtin_point(session, args.base_url, args.model, point, args.seed, warmup)

    t0 = time.time()
    warm = await measure(True)
    (out / f"{point.name}.metrics.before.prom").write_text(await fetch_text(session, f"{args.base_url}/metrics"))
    records = await measure(False)
    (out / f"{point.name}.metrics.after.prom").write_text(await fetch_text(session, f"{args.base_url}/metrics"))
    (out / "warmup").mkdir(exist_ok=True)
    for path, recs in ((out / "warmup" / f"{point.name}.jsonl", warm), (out / f"{point.name}.jsonl", records)):
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = summarize(records)
    summary.update(point=point.name, concurrency=point.concurrency, client=client, wall_s=round(time.time() - t0, 2))
    (out / f"{point.name}.summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def pick_client(requested: str) -> str:
    """servetune's client when it imports here, else the built-in one."""
    if requested != "auto":
        return requested
    try:
        import servetune.load.runner  # noqa: F401
        import servetune.metrics.summary  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import problem on the device means: use the fallback
        print(f"servetune client unavailable here ({type(exc).__name__}: {exc}); using the built-in client",
              flush=True)
        return "builtin"
    return "servetune"


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
        client = pick_client(args.client)
        manifest = {"setting": args.setting, "started": time.time(), "models": models, "client": client,
                    "points": [asdict(p) for p in points], "summaries": []}
        for point in points:
            try:
                summary = await run_point(session, args, point, out, client)
            except Exception as exc:  # noqa: BLE001 - one failing client must not lose the device run
                if client != "servetune":
                    raise
                print(f"servetune client failed on {point.name} ({type(exc).__name__}: {exc}); "
                      "switching to the built-in client", flush=True)
                client = manifest["client"] = "builtin"
                manifest["client_switch"] = {"point": point.name, "error": f"{type(exc).__name__}: {exc}"}
                summary = await run_point(session, args, point, out, client)
            manifest["summaries"].append(summary)
            print(json.dumps({k: summary.get(k) for k in (
                "point", "completed", "failed", "ttft_ms_p50", "tpot_ms_p50", "output_throughput", "wall_s")}),
                flush=True)
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
    ap.add_argument("--client", choices=("auto", "servetune", "builtin"), default="auto")
    ap.add_argument("--tokenizer", default=None,
                    help="tokenizer.json or model dir for exact prompt lengths (default: the server's /tokenize)")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
