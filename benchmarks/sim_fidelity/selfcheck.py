"""Does sim-serve (real time, over HTTP) reproduce `servetune estimate` (virtual time)?

    .venv/bin/python -m benchmarks.sim_fidelity.selfcheck     # ~2 minutes; writes selfcheck.md here

Starts `servetune sim-serve` at time scale 1 (H200, vLLM 0.24.0 defaults, setting A's flags), measures
the fidelity points with the device campaign's own client (`campaign.py`, servetune's `run_load`), then
replays the very same requests through the estimate engine and compares. The gap is what the server
adds (HTTP, tokenization, asyncio on a shared 2-core machine), i.e. how far sim-serve's latencies can
be read as the simulator's prediction.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from servetune.process.ports import free_port
from servetune.sim.calibration import measured_summary, relative_errors, simulated_summary, targets
from servetune.sim.fitting import deployment_for
from servetune.sim.results import measured_run
from servetune.sim.steptime import StepCoefficients

HERE = Path(__file__).resolve().parent


FLAGS = ["--max-model-len", "131072", "--language-model-only"]


def main() -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servetune",
            "sim-serve",
            "qwen3.6-27b",
            *FLAGS,
            "--gpu",
            "H200",
            "--vllm-version",
            "0.24.0",
            "--served-model-name",
            "m",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        out = Path(tempfile.mkdtemp(prefix="selfcheck-"))
        t0 = time.time()
        subprocess.run(
            [
                sys.executable,
                str(HERE / "campaign.py"),
                "--setting",
                "A",
                "--out",
                str(out),
                "--base-url",
                f"http://127.0.0.1:{port}",
                "--scale",
                "0.25",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.time() - t0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
    dep = deployment_for("qwen3.6-27b", "H200", "0.24.0", FLAGS)
    lines = [
        "# sim-serve (real time, HTTP) vs estimate (virtual time), same requests",
        "",
        f"Setting A flags on a simulated H200, default coefficients, servetune's client; campaign wall {wall:.0f} s;"
        f" load average {os.getloadavg()[0]:.1f} on 2 shared cores. Error = (estimate - sim-serve) / sim-serve.",
        "",
        "| point | requests | TTFT p50 sim-serve | err | TPOT p50 sim-serve | err | throughput sim-serve | err |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path in sorted(out.glob("*.jsonl")):
        run = measured_run(path, dep)
        measured = measured_summary(run)
        real = targets(measured)
        err = relative_errors(simulated_summary(run, StepCoefficients()), measured)
        lines.append(
            f"| {path.stem} | {len(run.records)} | {real['ttft_p50_s'] * 1e3:.1f} ms | {err['ttft_p50_s']:+.1%} | "
            f"{real['tpot_p50_s'] * 1e3:.2f} ms | {err['tpot_p50_s']:+.1%} | {real['output_throughput']:.1f} tok/s | "
            f"{err['output_throughput']:+.1%} |"
        )
    (HERE / "selfcheck.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
