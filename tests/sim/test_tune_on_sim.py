"""The Qwen3.6-27B / 2xA100 tuning example runs end to end against sim-serve (a trimmed matrix)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_tuning_example_runs_on_sim_serve(tmp_path: Path) -> None:
    exp = yaml.safe_load((ROOT / "examples/tune/qwen36-27b-2xa100-sim.yaml").read_text())
    exp["engine"]["flags"]["time-scale"] = 50
    exp["suite"] = {"repeats": 1, "warmup_requests": 1, "probes": {
        "short_latency": {"prompt": "hi", "max_tokens": 16},
        "decode_speed": {"output_tokens": 128},
        "long_prefill": {"prompt_tokens": 8000},
        "prefix_reuse": {"system_tokens": 4000},
    }}
    changes = exp["variants"]["matrix"]["changes"]
    exp["variants"]["matrix"]["changes"] = {k: changes[k] for k in ("R2-A2-no-mtp", "R2-A5-no-prefix")}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp, allow_unicode=True))
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-m", "servetune", "tune", str(path), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["variant"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert set(rows) == {"R2-A0", "R2-A2-no-mtp", "R2-A5-no-prefix"}
    assert all(r["status"] == "meets SLOs" for r in rows.values()), rows
    # MTP x2 at 75% acceptance decodes clearly faster than no MTP, even through the time-scaled server.
    assert float(rows["R2-A0"]["objective_mean"]) > 1.3 * float(rows["R2-A2-no-mtp"]["objective_mean"])
