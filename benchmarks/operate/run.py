"""Operate benchmark: what `servetune serve` costs and how fast it reacts, on llama.cpp's server (tiny model).

1. Request-path overhead: the same requests, alternating direct-to-engine and through servetune's nginx, in one
   run (non-streamed 1-token completions, and streamed 32-token completions: time to first chunk and total).
2. Blue-green switch time (start, acceptance, reload, drain), several switches.
3. Time to detect a dead engine (kill -9 → `died` event) and a hung one (SIGSTOP → `hung` event), and the time
   back to ready.
Writes results.json and RESULTS.md beside this script. Usage: python -m benchmarks.operate.run [--quick]
The machine must be quiet: latency figures on a shared 2-core box are noise-bound.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import time
import urllib.request
from pathlib import Path

from tests.operate.conftest import Serve  # (the same subprocess harness as the tests)

HERE = Path(__file__).resolve().parent


MODEL = "servetune-tiny"
FLAGS = ["--ctx-size", "8192", "--parallel", "4", "--threads", "1", "--metrics"]


def post(url: str, body: dict, stream: bool) -> tuple[float, float]:
    """(seconds to the first body byte, seconds total)."""
    data = json.dumps({**body, "stream": stream}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=data, headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:
        first = None
        while resp.read1(65536):
            first = first or time.perf_counter()
    return (first or time.perf_counter()) - t0, time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values) * 1000, 3),
        "p90_ms": round(pct(values, 0.9) * 1000, 3),
        "p99_ms": round(pct(values, 0.99) * 1000, 3),
        "mean_ms": round(statistics.fmean(values) * 1000, 3),
    }


def overhead(s: Serve, engine_url: str, n: int) -> dict:
    out: dict[str, dict[str, list[float]]] = {}
    cases = {
        "1 token, not streamed": ({"model": MODEL, "prompt": "Hello", "max_tokens": 1}, False),
        "32 tokens, streamed": ({"model": MODEL, "prompt": "Hello", "max_tokens": 32, "ignore_eos": True}, True),
    }
    for name, (body, stream) in cases.items():
        rows: dict[str, list[float]] = {"direct first": [], "nginx first": [], "direct total": [], "nginx total": []}
        for _ in range(5):  # warm-up, both paths
            post(engine_url, body, stream), post(s.url, body, stream)
        for i in range(n):
            order = [("direct", engine_url), ("nginx", s.url)] if i % 2 else [("nginx", s.url), ("direct", engine_url)]
            for label, url in order:
                first, total = post(url, body, stream)
                rows[f"{label} first"].append(first)
                rows[f"{label} total"].append(total)
        out[name] = {k: summary(v) for k, v in rows.items()}
        d, p = out[name]["direct total"]["median_ms"], out[name]["nginx total"]["median_ms"]
        out[name]["added_median_ms"] = round(p - d, 3)  # type: ignore[assignment]
    return out


def switches(s: Serve, tmp: Path, k: int) -> list[dict]:
    from servetune.operate.control import request_switch
    from servetune.operate.source import load_source

    results = []
    for i in range(k):
        cfg = tmp / f"green{i}.yaml"
        cfg.write_text(
            json.dumps(
                {
                    "engine": "llamacpp",
                    "model": "tiny",
                    "flags": {"ctx-size": 8192, "parallel": 2 + i % 2 * 2, "threads": 1, "metrics": True},
                }
            )
        )
        results.append(request_switch(s.run_dir, load_source(cfg).cfg, 300))
    return results


def detection(s: Serve, kind: str, k: int) -> list[dict]:
    rows = []
    for _ in range(k):
        ready = s.wait_ready(after=len(s.events) - 1)
        time.sleep(1.0)
        n = len(s.events)
        t = time.time()
        os.killpg(ready["pid"], signal.SIGKILL if kind == "dead" else signal.SIGSTOP)
        ev = s.wait_event(lambda e: e["event"] == ("died" if kind == "dead" else "hung"), 60, after=n)
        back = s.wait_ready(after=s.events.index(ev))
        rows.append({"detect_s": round(ev["t"] - t, 4), "back_ready_s": round(back["t"] - t, 4)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a check that the script works)")
    args = ap.parse_args()
    n, k = (40, 2) if args.quick else (300, 5)
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="servetune-operate-bench-"))
    period, deadline, failures = 1.0, 2.0, 2

    def serve(name: str, liveness: tuple[float, float, int]) -> Serve:
        return Serve(
            tmp / name,
            [
                *("--engine", "llamacpp", "--model", "tiny", "--backoff-base", "0.2", "--drain", "10"),
                *("--liveness-period", str(liveness[0]), "--liveness-deadline", str(liveness[1])),
                *("--liveness-failures", str(liveness[2]), "--crash-loop", "100", "--"),
                *FLAGS,
            ],
        )

    results: dict = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "engine": "llama.cpp server (xllamacpp), servetune's tiny model, " + " ".join(FLAGS),
        "liveness": {"period_s": period, "deadline_s": deadline, "failures": failures},
        "quick": args.quick,
    }
    s = serve("steady", (5.0, 30.0, 3))  # overhead and switches: a probe that never fires on a busy box
    try:
        ready = s.wait_ready()
        results["overhead"] = overhead(s, ready["url"], n)
        results["switch"] = switches(s, tmp, k)
    finally:
        s.stop()
    s = serve("faults", (period, deadline, failures))
    try:
        results["dead"] = detection(s, "dead", k)
        results["hung"] = detection(s, "hung", k)
    finally:
        s.stop()
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    write_md(results)
    print((HERE / "RESULTS.md").read_text())


def write_md(r: dict) -> None:
    lines = [
        "# Operate benchmark: request-path overhead, switch time, detection times",
        "",
        f"Produced by `benchmarks/operate/run.py`{' --quick' if r['quick'] else ''} (raw numbers in results.json). "
        f"Machine: {r['machine']['platform']}, {r['machine']['cpus']} CPUs. Engine: {r['engine']}.",
        "",
        "## Latency through nginx vs direct (one run, requests alternating)",
        "",
        "| request | path | first byte median | p99 | total median | p99 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for case, rows in r["overhead"].items():
        for path in ("direct", "nginx"):
            f, t = rows[f"{path} first"], rows[f"{path} total"]
            lines.append(
                f"| {case} | {path} | {f['median_ms']} ms | {f['p99_ms']} ms | {t['median_ms']} ms | {t['p99_ms']} ms |"
            )
        lines.append(f"| {case} | **added by nginx** | | | **{rows['added_median_ms']} ms** | |")
    sw = r["switch"]
    lines += [
        "",
        "## Blue-green switch",
        "",
        "| # | start + acceptance | reload in force | old workers drained | total |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {i + 1} | {x['start_s']} s | {x['reload_s'] * 1000:.1f} ms | {x['drain_s']} s | {x['total_s']} s |"
            for i, x in enumerate(sw)
        ),
        "",
        f"## Detection (liveness: every {r['liveness']['period_s']} s, deadline {r['liveness']['deadline_s']} s, "
        f"{r['liveness']['failures']} misses)",
        "",
        "| fault | detected after (each) | back to ready after (each) |",
        "|---|---|---|",
        f"| kill -9 | {', '.join(str(x['detect_s']) for x in r['dead'])} s | "
        f"{', '.join(str(x['back_ready_s']) for x in r['dead'])} s |",
        f"| SIGSTOP | {', '.join(str(x['detect_s']) for x in r['hung'])} s | "
        f"{', '.join(str(x['back_ready_s']) for x in r['hung'])} s |",
        "",
        "Notes: a kill -9 is 'detected' when the `died` event is written, after the pool was already switched to the "
        "fast 503 (the nginx reload is in force once no old worker holds the listening socket, ~0.1 s here); a hang "
        "is detected after `failures` missed probes, so at most period + failures x (deadline + period). "
        "'Old workers drained' counts from the reload on. 'Back to ready' includes the supervisor's restart backoff "
        "by design (`--backoff-base 0.2`: 0.2 s x 2^(n-1) before the n-th restart in a row, at most 60 s): every "
        "fault here hits one serve, one after the other, so the later SIGSTOP restarts wait 6.4-51 s of backoff; "
        "the time an engine takes to start again is the first rows'. "
        + (
            "--quick: fewer repeats, a check that the script works."
            if r["quick"]
            else "Run on a 2-core machine shared with other work (no other benchmark at the same time)."
        ),
        "",
    ]
    (HERE / "RESULTS.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
