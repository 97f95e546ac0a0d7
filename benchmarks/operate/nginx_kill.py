"""Operate benchmark: what a `kill -9` of nginx under `servetune serve` costs the clients, and how fast service is back.

Each trial starts its own `servetune serve` (llama.cpp's server, the tiny model), sends an open-loop load of
streamed completions (`tests/operate/openloop.py`: RATE requests per second whatever the answers), kills
nginx's whole process group with SIGKILL after KILL_AT_S, and records:

- the requests that failed (refused: an HTTP error status; broken: a refused connection, a cut stream),
- the time to recover: from the kill to the supervisor's `nginx_restarted` event (nginx listens again),
- the time from the kill to the send time of the first request answered after it (what a client sees),
- whether every request sent after the restart was answered.

Writes nginx_kill.json and NGINX_KILL.md beside this script.
Usage: .venv/bin/python -m benchmarks.operate.nginx_kill [--trials 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import tempfile
import time
from pathlib import Path

from tests.operate import openloop
from tests.operate.conftest import Serve  # (the same subprocess harness as the tests)

HERE = Path(__file__).resolve().parent
MODEL = "servetune-tiny"
FLAGS = ["--ctx-size", "8192", "--parallel", "4", "--threads", "1", "--metrics"]
RATE = 20.0
DURATION_S = 10.0
KILL_AT_S = 3.0


def trial(tmp: Path, index: int) -> dict:
    s = Serve(tmp / f"trial{index}", ["--engine", "llamacpp", "--model", "tiny", "--", *FLAGS])
    try:
        s.wait_ready()
        nginx_pid = s.wait_event(lambda e: e["event"] == "serving")["nginx_pid"]
        marks: dict[str, float] = {}

        async def load_and_kill() -> openloop.LoadResult:
            task = asyncio.create_task(openloop.run(s.url, rate=RATE, duration_s=DURATION_S, model=MODEL))
            await asyncio.sleep(KILL_AT_S)
            marks["mono"], marks["wall"] = time.monotonic(), time.time()
            os.killpg(nginx_pid, signal.SIGKILL)
            return await task

        result = asyncio.run(load_and_kill())
        back = s.wait_event(lambda e: e["event"] == "nginx_restarted")
        died = s.wait_event(lambda e: e["event"] == "nginx_died")
    finally:
        s.stop()
    recover_s = back["t"] - marks["wall"]
    failed = result.of("refused") + result.of("broken")
    after = [o for o in result.of("answered") if o.sent > marks["mono"]]
    sent_after_back = [o for o in result.outcomes if o.sent > marks["mono"] + recover_s]
    return {
        "sent": len(result.outcomes),
        "answered": len(result.of("answered")),
        "failed": len(failed),
        "refused": len(result.of("refused")),
        "broken": len(result.of("broken")),
        "failed_details": sorted({o.detail[:80] for o in failed}),
        "noticed_s": round(died["t"] - marks["wall"], 4),
        "recover_s": round(recover_s, 4),
        "down_s": back["down_s"],
        "first_answered_sent_after_s": round(min(o.sent for o in after) - marks["mono"], 4) if after else None,
        "sent_after_restart": len(sent_after_back),
        "answered_after_restart": sum(o.kind == "answered" for o in sent_after_back),
        "leftovers": s.leftovers(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="servetune-nginx-kill-"))
    load1 = os.getloadavg()[0]
    rows = [trial(tmp, i) for i in range(args.trials)]
    results = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_1m_at_start": round(load1, 2),
        "engine": "llama.cpp server (xllamacpp), servetune's tiny model, " + " ".join(FLAGS),
        "load": f"open loop, {RATE:g} streamed completions/s (8 tokens each) for {DURATION_S:g} s; "
        f"nginx's group killed with SIGKILL at {KILL_AT_S:g} s",
        "trials": rows,
    }
    (HERE / "nginx_kill.json").write_text(json.dumps(results, indent=1) + "\n")
    write_md(results)
    print((HERE / "NGINX_KILL.md").read_text())


def write_md(r: dict) -> None:
    rows = r["trials"]
    lines = [
        "# Operate benchmark: kill -9 of nginx under load",
        "",
        f"Produced by `benchmarks/operate/nginx_kill.py` (raw numbers in nginx_kill.json). Machine: "
        f"{r['machine']['platform']}, {r['machine']['cpus']} CPUs, 1-minute load average "
        f"{r['load_average_1m_at_start']} at the start. Engine: {r['engine']}. Load: {r['load']}.",
        "",
        "| trial | sent | failed (refused + broken) | noticed after | nginx back after | first answered request "
        "sent after | answered of those sent after the restart |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {i + 1} | {x['sent']} | {x['failed']} ({x['refused']} + {x['broken']}) | {x['noticed_s']} s | "
            f"{x['recover_s']} s | {x['first_answered_sent_after_s']} s | "
            f"{x['answered_after_restart']} of {x['sent_after_restart']} |"
            for i, x in enumerate(rows)
        ),
        "",
        f"Mean: {statistics.fmean(x['failed'] for x in rows):.1f} requests failed, nginx back after "
        f"{statistics.fmean(x['recover_s'] for x in rows):.3f} s. 'Noticed' is the `nginx_died` event, 'back' the "
        "`nginx_restarted` event (nginx's own master holds the listening socket again), both counted from the "
        "kill. The failed requests are those in flight through the killed nginx (their streams are cut) and those "
        "sent while no process listened (connection refused). Processes left after each serve stopped: "
        f"{sum(len(x['leftovers']) for x in rows)}.",
        "",
    ]
    (HERE / "NGINX_KILL.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
