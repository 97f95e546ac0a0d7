"""How fast `servetune estimate` is: 1,000-request workloads, wall time vs simulated time.

    .venv/bin/python -m benchmarks.sim_fidelity.estimate_speed    # writes estimate_speed.{json,md} here

Each case runs the real CLI in a fresh process (`servetune estimate ... --json`), so the wall time
includes Python start, imports and planning; the simulated duration is what the same workload would
take on the GPU; the loop columns time the same run in process (`SimBackend.run`: the simulation, the
records and their summary, without start-up and planning). The goal (issue 6): a 1,000-request workload in
seconds, at least 100x real time.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
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
WORKLOAD = ["--requests", "1000", "--input-tokens", "1024", "--output-tokens", "256", "--range-ratio", "0.25"]
"""bench's load options: 1,000 requests, lengths uniform within ±25% of 1024 in / 256 out."""


def loop_time(model_args: list[str], conc: int) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and engine steps of the simulation alone (in process, planning excluded)."""
    from servetune.cli.model_options import parse_words
    from servetune.load.backend import ClientSpec
    from servetune.sim.args import EstimateArgs
    from servetune.sim.backend import SimBackend
    from servetune.sim.deployment import build_deployment
    from servetune.sim.flags import parse_sim_args

    args = parse_words(EstimateArgs, [*model_args, *WORKLOAD, "--concurrency", str(conc)])
    options = args.load()
    deployment = build_deployment(parse_sim_args(list(args.engine_flags)))
    backend = SimBackend(deployment, client=ClientSpec(endpoint="completions"))
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(backend.run(options.workload(), options.shape()))
    return time.process_time() - cpu, time.perf_counter() - wall, backend.steps


def main() -> None:
    rows = []
    for label, model_args in CASES:
        for conc in LOADS:
            cmd = [sys.executable, "-m", "servetune", "estimate", *model_args, *WORKLOAD, "--concurrency", str(conc)]
            t0 = time.perf_counter()
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True).stdout
            wall = time.perf_counter() - t0
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
            result = json.loads(out)
            summary = result["summary"]
            loop_cpu, loop_wall, steps = loop_time(model_args, conc)
            rows.append(
                {
                    "deployment": label,
                    "concurrency": conc,
                    "requests": summary["completed"],
                    "cli_wall_s": round(wall, 2),
                    "cli_cpu_s": round(cli_cpu, 2),
                    "sim_loop_wall_s": round(loop_wall, 2),
                    "sim_loop_cpu_s": round(loop_cpu, 2),
                    "simulated_s": round(result["wall_s"], 1),
                    "speedup_cli": round(result["wall_s"] / wall, 1),
                    "speedup_loop_cpu": round(result["wall_s"] / loop_cpu, 1),
                    "steps": steps,
                    "tpot_p50_ms": round(summary["tpot_ms"]["p50"], 2),
                    "output_tok_s": round(summary["output_throughput"], 1),
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
        "time; loop = `SimBackend.run` in process: simulation, records and summary (CPU time: other jobs share "
        "these 2 cores, so wall time varies).",
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
