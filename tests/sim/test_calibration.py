"""Calibration recovers the speeds of measured runs, and `servetune calibrate`/`estimate` work as commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from servetune.plan.roofline import Efficiency
from servetune.sim.calibration import (
    fit_coefficients,
    measured_targets,
    relative_errors,
    simulated_targets,
)
from servetune.sim.fitting import deployment_for, runs_from_dir
from servetune.sim.profile import CalibrationProfile
from servetune.sim.steptime import StepCoefficients
from servetune.sim.virtual import RequestSpec, run_virtual

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--max-model-len", "32768", "--language-model-only"]
TRUTH = StepCoefficients(
    efficiency=Efficiency(bandwidth=0.85, mfu_prefill=0.45, step_overhead_s=0.001),
    per_seq_overhead_s=5e-5,
    request_overhead_s=0.008,
)
POINTS = {"decode": (1, [(1024, 128)] * 3), "prefill": (1, [(8192, 8)] * 2), "load": (16, [(512, 64)] * 32)}


def write_measured(directory: Path) -> None:
    """Result files as servetune's client writes them, from a 'real engine' with TRUTH coefficients."""
    directory.mkdir(parents=True)
    (directory / "flags.txt").write_text("\n".join(FLAGS) + "\n")
    dep = deployment_for("qwen3.6-27b", "H200", "0.24.0", FLAGS)
    timing = replace(dep.timing, coef=TRUTH)
    for name, (conc, lengths) in POINTS.items():
        sim = run_virtual([RequestSpec(p, o) for p, o in lengths], dep.limits, timing, concurrency=conc)
        with (directory / f"{name}.jsonl").open("w") as f:
            for i, t in enumerate(sim.timelines):
                chunks = [int((c + 5) * 1e9) for c in t.chunk_times]
                f.write(
                    json.dumps(
                        {
                            "index": i,
                            "phase": "measure",
                            "sent_ns": int((t.sent + 5) * 1e9),
                            "chunk_ns": chunks,
                            "done_ns": chunks[-1],
                            "prompt_tokens": lengths[i][0],
                            "output_tokens": t.output_tokens,
                            "error_class": None,
                            "concurrency": conc,
                        }
                    )
                    + "\n"
                )


def test_fit_recovers_measured_speeds(tmp_path: Path) -> None:
    write_measured(tmp_path / "A")
    runs = runs_from_dir(tmp_path / "A", "qwen3.6-27b", "H200", "0.24.0")
    before = {r.name: relative_errors(simulated_targets(r, StepCoefficients()), measured_targets(r)) for r in runs}
    coef, errors = fit_coefficients(runs, iters=80)
    worst_before = max(abs(e) for errs in before.values() for e in errs.values())
    worst_after = max(abs(e) for errs in errors.values() for e in errs.values())
    assert worst_before > 0.1
    assert worst_after < 0.05, errors


def test_calibrate_and_estimate_commands(tmp_path: Path) -> None:
    write_measured(tmp_path / "A")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    profile = tmp_path / "profile.json"
    cal = subprocess.run(
        [
            sys.executable,
            "-m",
            "servetune",
            "calibrate",
            str(tmp_path / "A"),
            "--model",
            "qwen3.6-27b",
            "--gpu",
            "H200",
            "--vllm-version",
            "0.24.0",
            "--iters",
            "20",
            "--out",
            str(profile),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert cal.returncode == 0, cal.stderr
    loaded = CalibrationProfile.load(profile)
    assert loaded.gpu == "H200" and loaded.engine_version == "0.24.0" and len(loaded.fitted_on) == 3
    est = subprocess.run(
        [
            sys.executable,
            "-m",
            "servetune",
            "estimate",
            "qwen3.6-27b",
            *FLAGS,
            "--gpu",
            "H200",
            "--calibration",
            str(profile),
            "--num-requests",
            "50",
            "--concurrency",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert est.returncode == 0, est.stderr
    assert json.loads(est.stdout)["completed"] == 50
    bad = subprocess.run(
        [sys.executable, "-m", "servetune", "estimate", "qwen3.6-27b", "--gpu", "H200"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--concurrency" in bad.stderr
