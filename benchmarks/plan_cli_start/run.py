"""Cold CLI start of `servetune plan`: wall time of fresh processes, side by side with a bare Python start.

Each sample is a new process (the interpreter, imports, config parsing, the plan, the output), run in
rotation with the baselines so that machine load affects all alike. Writes results.json and RESULTS.md here.
Usage: .venv/bin/python benchmarks/plan_cli_start/run.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
PY = sys.executable
CASES = {
    "python -c pass (baseline)": [PY, "-c", "pass"],
    "python -c 'import servetune'": [PY, "-c", "import servetune"],
    "servetune --help": [PY, "-m", "servetune", "--help"],
    "servetune plan (table)": [
        PY,
        "-m",
        "servetune",
        "plan",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "A100-80G-SXMx2",
        "--max-model-len",
        "128K",
        "--language-model-only",
    ],
    "servetune plan --json (MTP, fixes off)": [
        PY,
        "-m",
        "servetune",
        "plan",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "A100-80G-SXMx2",
        "--max-model-len",
        "128K",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 2}',
        "--json",
    ],
    "servetune plan (infeasible: 5 fixes re-planned)": [
        PY,
        "-m",
        "servetune",
        "plan",
        "--model",
        "qwen2-7b",
        "--gpu",
        "A10G",
    ],
}


def sample(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+sys) of one fresh process; CPU time is what contention does not inflate."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{argv} failed: {out.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _planning_ms() -> float:
    """Median wall time of one plan_for call after warm-up, in this process."""
    from servetune.engines.config import EngineConfig
    from servetune.hardware.gpus import parse_gpu_arg
    from servetune.plan.api import plan_for

    choice = parse_gpu_arg("A100-80G-SXMx2")
    gpu, n = choice.gpu, choice.count
    cfg = EngineConfig(model="qwen3.6-27b", flags={"max-model-len": "128K", "language-model-only": True})
    plan_for(cfg, gpu, n)
    samples = []
    for _ in range(20):
        t0 = time.perf_counter()
        plan_for(cfg, gpu, n)
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    for argv in CASES.values():  # warm the page cache and .pyc files; not measured
        sample(argv)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    cpu: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):
        for name, argv in CASES.items():
            wall, used = sample(argv)
            times[name].append(wall)
            cpu[name].append(used)
    load_avg = os.getloadavg()
    planning_ms = _planning_ms()
    torch_loaded = subprocess.run(
        [PY, "-c", "import sys, servetune.cli, servetune.plan.api; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    summary = {
        name: {
            "median_s": statistics.median(v),
            "min_s": min(v),
            "max_s": max(v),
            "cpu_median_s": statistics.median(cpu[name]),
            "samples": v,
            "cpu_samples": cpu[name],
        }
        for name, v in times.items()
    }
    env = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1_5_15": load_avg,
        "repeats": args.repeats,
        "torch_imported_by_plan": torch_loaded,
        "planning_only_ms_median": planning_ms,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    (HERE / "results.json").write_text(json.dumps({"environment": env, "cases": summary}, indent=2) + "\n")
    base = summary["python -c pass (baseline)"]["median_s"]
    lines = [
        "# Cold CLI start of `servetune plan`",
        "",
        f"Fresh processes, {args.repeats} rounds in rotation after one unmeasured warm-up round "
        f"(Python {env['python']}, {env['cpus']} CPUs shared with other jobs, load average "
        f"{load_avg[0]:.1f}/{load_avg[1]:.1f}/{load_avg[2]:.1f} at the end, {env['date']}).",
        "Run: `.venv/bin/python benchmarks/plan_cli_start/run.py`. Raw samples: results.json.",
        "",
        "| command | wall median | wall min | wall max | CPU time median (user+sys) | wall median minus bare Python |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in summary.items():
        lines.append(
            f"| {name} | {s['median_s']:.3f} s | {s['min_s']:.3f} s | {s['max_s']:.3f} s | "
            f"{s['cpu_median_s']:.3f} s | {s['median_s'] - base:+.3f} s |"
        )
    lines += [
        "",
        f"The planning itself (plan_for of Qwen3.6-27B on 2x A100, in a warm process): {planning_ms:.1f} ms median; "
        "the rest of a cold start is the interpreter, imports (typer, rich, pydantic) and printing.",
        f"torch imported by `servetune.cli` + `servetune.plan.api`: {torch_loaded}.",
        "",
    ]
    (HERE / "RESULTS.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
