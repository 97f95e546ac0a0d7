"""Measures real vLLM at the simulator's fidelity points and writes what `fit_and_score.py` reads.

Runs on the device machine (python3.12, PYTHONPATH=/tmp/site:src: vLLM's dependencies and servetune's
source only), against the server that `vllm_up.sh` started:

    python3 benchmarks/sim_fidelity/campaign.py --setting A --out "$OUT/A"

Prompts are lists of random token ids (exact input lengths without a tokenizer, no accidental prefix
hits); every request streams with `ignore_eos`, so each gets exactly its `max_tokens`. Each point runs
its own warm-up requests first (excluded), then its measured requests. Written under --out:

    campaign.json                 the points, the server's /v1/models, start/end times
    <point>.jsonl                 one record per measured request (servetune's RequestRecord fields
                                  when the load room's client ran it: sent/chunk/end times in monotonic ns)
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


async def run_point(session, base: str, model: str, point: FidelityPoint, out: Path, seed: int) -> dict:
    rng = random.Random(f"{seed}-{point.name}")
    url = f"{base}/v1/completions"
    warm = [(i, prompt_ids(rng, point.warmup_prompt), point.warmup_output) for i in range(point.warmup_requests)]
    lengths = point.lengths(rng)
    jobs = [(i, prompt_ids(rng, p), o) for i, (p, o) in enumerate(lengths)]
    t0 = time.time()
    warm_records = await closed_loop(session, url, model, point, warm, True, point.concurrency)
    (out / f"{point.name}.metrics.before.prom").write_text(await fetch_text(session, f"{base}/metrics"))
    records = await closed_loop(session, url, model, point, jobs, False, point.concurrency)
    (out / f"{point.name}.metrics.after.prom").write_text(await fetch_text(session, f"{base}/metrics"))
    with (out / f"{point.name}.jsonl").open("w") as f:
        for r in warm_records + records:
            f.write(json.dumps(asdict(r)) + "\n")
    summary = summarize([asdict(r) for r in records])
    summary.update(point=point.name, concurrency=point.concurrency, wall_s=round(time.time() - t0, 2))
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
        manifest = {"setting": args.setting, "started": time.time(), "models": models,
                    "points": [asdict(p) for p in points], "summaries": []}
        for point in points:
            summary = await run_point(session, args.base_url, args.model, point, out, args.seed)
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
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
