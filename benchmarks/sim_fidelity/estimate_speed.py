"""How fast `servetune estimate` is: 1,000-request workloads, wall time vs simulated time.

    .venv/bin/python benchmarks/sim_fidelity/estimate_speed.py     # writes estimate_speed.{json,md} here

Each case runs the real CLI in a fresh process (`servetune estimate ... --json`), so the wall time
includes Python start, imports and planning; the simulated duration is what the same workload would
take on the GPU. The goal (issue 6): a 1,000-request workload in seconds, at least 100x real time.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = [
    (
        "H200, vLLM 0.24 defaults",
        [
            "qwen3.6-27b",
            "--max-model-len",
            "131072",
            "--language-model-only",
            "--gpu",
            "H200",
            "--vllm-version",
            "0.24.0",
        ],
    ),
    (
        "2xA100-80G SXM, TP2, prefix caching, MTP x2",
        [
            "qwen3.6-27b",
            "-tp",
            "2",
            "--max-model-len",
            "131072",
            "--language-model-only",
            "--gpu",
            "A100-80G-SXM",
            "--enable-prefix-caching",
            "--speculative-config",
            '{"method":"mtp","num_speculative_tokens":2}',
        ],
    ),
]
LOADS = [1, 16, 64, 256]


def main() -> None:
    rows = []
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for label, model_args in CASES:
        for conc in LOADS:
            cmd = [
                sys.executable,
                "-m",
                "servetune",
                "estimate",
                *model_args,
                "--num-requests",
                "1000",
                "--input-len",
                "1024",
                "--output-len",
                "256",
                "--spread",
                "0.25",
                "--concurrency",
                str(conc),
                "--json",
            ]
            t0 = time.perf_counter()
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
            wall = time.perf_counter() - t0
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
            r = json.loads(out)
            rows.append(
                {
                    "deployment": label,
                    "concurrency": conc,
                    "requests": 1000,
                    "cli_wall_s": round(wall, 2),
                    "cli_cpu_s": round(cli_cpu, 2),
                    "sim_loop_wall_s": round(r["wall_s"], 2),
                    "sim_loop_cpu_s": round(r["cpu_s"], 2),
                    "simulated_s": round(r["duration_s"], 1),
                    "speedup_cli": round(r["duration_s"] / wall, 1),
                    "speedup_loop_cpu": round(r["duration_s"] / r["cpu_s"], 1),
                    "steps": r["sim_steps"],
                    "tpot_p50_ms": round(r["tpot_ms"]["p50"], 2),
                    "output_tok_s": round(r["output_throughput"], 1),
                }
            )
            print(rows[-1], flush=True)
    (HERE / "estimate_speed.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# `servetune estimate` speed (1,000 requests, 1024±25% in / 256±25% out, closed loop)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores shared with other work; "
        f"Python {platform.python_version()}. Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "CLI = a fresh `servetune estimate --json` process (start, imports, planning, simulation), wall and CPU "
        "time; loop = the simulation alone (CPU time: other jobs share these 2 cores, so wall time varies).",
        f"Load average during the run: {os.getloadavg()[0]:.1f} (2 cores).",
        "",
        "| deployment | concurrency | CLI wall s | CLI CPU s | loop CPU s | simulated s | speed-up (CLI wall) "
        "| speed-up (loop CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['deployment']} | {r['concurrency']} | {r['cli_wall_s']} | {r['cli_cpu_s']} | "
            f"{r['sim_loop_cpu_s']} | {r['simulated_s']} | {r['speedup_cli']}x | {r['speedup_loop_cpu']}x |"
        )
    (HERE / "estimate_speed.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
