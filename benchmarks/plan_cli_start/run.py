"""Cold CLI start of `servetune plan`: wall time of fresh processes, side by side with a bare Python start.

Each sample is a new process (the interpreter, imports, config parsing, the plan, the output), run in
rotation with the baselines so that machine load affects all alike. Writes results.json and RESULTS.md here.
Usage: .venv/bin/python benchmarks/plan_cli_start/run.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import platform
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
    "servetune plan (table)": [PY, "-m", "servetune", "plan", "--model", "qwen3.6-27b", "--gpu", "A100-80G-SXMx2",
                               "--max-model-len", "128K", "--language-model-only"],
    "servetune plan --json (MTP, fixes off)": [PY, "-m", "servetune", "plan", "--model", "qwen3.6-27b", "--gpu",
                                               "A100-80G-SXMx2", "--max-model-len", "128K", "--speculative-config",
                                               '{"method": "mtp", "num_speculative_tokens": 2}', "--json"],
    "servetune plan (infeasible: 5 fixes re-planned)": [PY, "-m", "servetune", "plan", "--model", "qwen2-7b", "--gpu",
                                                        "A10G"],
}


def sample(argv: list[str]) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{argv} failed: {out.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    for argv in CASES.values():  # warm the page cache and .pyc files; not measured
        sample(argv)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):
        for name, argv in CASES.items():
            times[name].append(sample(argv))
    torch_loaded = subprocess.run(
        [PY, "-c", "import sys, servetune.cli, servetune.plan.api; print('torch' in sys.modules)"],
        capture_output=True, text=True,
    ).stdout.strip()
    summary = {
        name: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "samples": v}
        for name, v in times.items()
    }
    env = {"python": platform.python_version(), "machine": platform.machine(), "cpus": __import__("os").cpu_count(),
           "repeats": args.repeats, "torch_imported_by_plan": torch_loaded,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    (HERE / "results.json").write_text(json.dumps({"environment": env, "cases": summary}, indent=2) + "\n")
    base = summary["python -c pass (baseline)"]["median_s"]
    lines = [
        "# Cold CLI start of `servetune plan`",
        "",
        f"Fresh processes, {args.repeats} rounds in rotation after one unmeasured warm-up round "
        f"(Python {env['python']}, {env['cpus']} CPUs shared with other jobs, {env['date']}).",
        "Run: `.venv/bin/python benchmarks/plan_cli_start/run.py`. Raw samples: results.json.",
        "",
        "| command | median | min | max | median minus bare Python |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['median_s']:.3f} s | {s['min_s']:.3f} s | {s['max_s']:.3f} s | "
                     f"{s['median_s'] - base:+.3f} s |")
    lines += ["", f"torch imported by `servetune.cli` + `servetune.plan.api`: {torch_loaded}.", ""]
    (HERE / "RESULTS.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
