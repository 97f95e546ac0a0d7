"""Readiness and teardown benchmark: how long after an engine *says* it is ready does servetune know, and how
long does a stop take compared with its grace period.

For each launch a side thread tails the engine's log every millisecond and stamps (monotonic clock) the moment
the engine's own ready line appears (vLLM: uvicorn's "Application startup complete."; llama.cpp: "listening
on"); `launch()` returning stamps the moment servetune knows (`/health` 200 and `/v1/models` lists the name).
Then `stop(grace_s)` is timed. Real engines, tiny model, this machine.

    .venv/bin/python benchmarks/readiness/run.py --llamacpp 20 --vllm 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

from servetune.engines.config import EngineConfig
from servetune.engines.launch import launch
from servetune.tiny.build import build_tiny_model

HERE = Path(__file__).resolve().parent
READY_LINE = {"vllm": "Application startup complete", "llamacpp": "listening on"}
GRACE_S = 10.0


def _tail_for(log_dir: Path, needle: str, found: dict, stop: threading.Event) -> None:
    """Stamps the monotonic time at which `needle` first shows up in the (single) log file of `log_dir`."""
    path: Path | None = None
    offset, buf = 0, b""
    while not stop.is_set():
        if path is None:
            files = list(log_dir.glob("*.log"))
            path = files[0] if files else None
        if path is not None:
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            if chunk:
                offset += len(chunk)
                buf = (buf + chunk)[-4096:]
                if needle.encode() in buf:
                    found["t"] = time.monotonic()
                    return
        time.sleep(0.001)


def one_launch(cfg: EngineConfig, needle: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp)
        found: dict = {}
        stop = threading.Event()
        tail = threading.Thread(target=_tail_for, args=(log_dir, needle, found, stop), daemon=True)
        tail.start()
        t0 = time.monotonic()
        engine = launch(cfg, log_dir=log_dir, startup_timeout_s=900)
        t_known = time.monotonic()
        tail.join(timeout=2)
        stop.set()
        report = engine.stop(grace_s=GRACE_S)
    assert report is not None and report.clean, report
    return {
        "engine": cfg.engine,
        "startup_s": round(t_known - t0, 4),
        "ready_line_to_known_ms": round((t_known - found["t"]) * 1000, 2) if "t" in found else None,
        "teardown_s": report.seconds,
        "grace_s": GRACE_S,
        "sigkill_needed": report.sent_sigkill,
        "survivors": report.survivors,
    }


def summarize(rows: list[dict]) -> dict:
    lat = [r["ready_line_to_known_ms"] for r in rows if r["ready_line_to_known_ms"] is not None]
    td = [r["teardown_s"] for r in rows]
    return {
        "launches": len(rows),
        "ready_to_known_ms_mean": round(statistics.fmean(lat), 2) if lat else None,
        "ready_to_known_ms_median": round(statistics.median(lat), 2) if lat else None,
        "ready_to_known_ms_max": round(max(lat), 2) if lat else None,
        "startup_s_mean": round(statistics.fmean(r["startup_s"] for r in rows), 3),
        "teardown_s_mean": round(statistics.fmean(td), 4),
        "teardown_s_max": round(max(td), 4),
        "grace_s": GRACE_S,
        "sigkill_needed": sum(r["sigkill_needed"] for r in rows),
        "processes_left": sum(len(r["survivors"]) for r in rows),
    }


def render_markdown(result: dict) -> str:
    """RESULTS.md from results.json: the summary table, then how it was measured."""
    lines = [
        "# Readiness and teardown benchmark",
        "",
        "Produced by `benchmarks/readiness/run.py` (raw runs in `results.json`). Machine: "
        f"{result['machine']['platform']}, {result['machine']['cpus']} CPUs, shared with other work while it ran.",
        "",
        "| engine | launches | ready line → servetune knows, mean (median, max) | startup mean | "
        "teardown mean (max) | grace | SIGKILL needed | processes left |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result["summary"].items():
        lines.append(
            f"| {name} | {s['launches']} | **{s['ready_to_known_ms_mean']} ms** ({s['ready_to_known_ms_median']}, "
            f"{s['ready_to_known_ms_max']}) | {s['startup_s_mean']} s | {s['teardown_s_mean']} s "
            f"({s['teardown_s_max']} s) | {s['grace_s']} s | {s['sigkill_needed']} | {s['processes_left']} |"
        )
    lines += [
        "",
        "How: a side thread tails the launch's log file every 1 ms and stamps the moment the engine's own ready "
        "line appears (vLLM: uvicorn's `Application startup complete.`; llama.cpp: `listening on`); "
        "`launch()` returning stamps the moment servetune knows (`/health` 200 and `/v1/models` lists the "
        f"served name; poll period {result['poll_s']} s). Goal: under 100 ms on average. Teardown is "
        "`stop(grace_s)`: SIGTERM to the process group, SIGKILL only after the grace period, then a /proc scan "
        "proving no process of the group (or its session) is left.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llamacpp", type=int, default=20, help="llama.cpp launches")
    ap.add_argument("--vllm", type=int, default=3, help="vLLM (CPU) launches")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    ap.add_argument("--render", action="store_true", help="only rewrite RESULTS.md from results.json")
    args = ap.parse_args()
    if args.render:
        (HERE / "RESULTS.md").write_text(render_markdown(json.loads(args.out.read_text())))
        return
    tiny = build_tiny_model(HERE.parents[1] / ".servetune-cache" / "tiny-model")
    configs = {
        "llamacpp": EngineConfig(
            engine="llamacpp",
            model=str(tiny.gguf_path),
            served_model_name=tiny.served_name,
            flags={"ctx-size": 4096, "parallel": 2},
        ),
        "vllm": EngineConfig(
            engine="vllm",
            model=str(tiny.hf_dir),
            served_model_name=tiny.served_name,
            flags={"max-model-len": 2048, "max-num-seqs": 8, "enforce-eager": True},
        ),
    }
    rows: list[dict] = []
    for name, n in (("llamacpp", args.llamacpp), ("vllm", args.vllm)):
        for i in range(n):
            row = one_launch(configs[name], READY_LINE[name])
            print(json.dumps(row), flush=True)
            rows.append({**row, "repeat": i})
    result = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": __import__("os").cpu_count(),
        },
        "poll_s": __import__("servetune.engines.launch", fromlist=["POLL_S"]).POLL_S,
        "summary": {
            name: summarize([r for r in rows if r["engine"] == name])
            for name in ("llamacpp", "vllm")
            if any(r["engine"] == name for r in rows)
        },
        "runs": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(render_markdown(result))
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
