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
    exp["suite"] = {
        "repeats": 1,
        "warmup_requests": 1,
        "probes": {
            "short_latency": {"prompt": "hi", "max_tokens": 16},
            "decode_speed": {"output_tokens": 128},
            "long_prefill": {"prompt_tokens": 8000},
            "prefix_reuse": {"system_tokens": 4000},
        },
    }
    changes = exp["variants"]["matrix"]["changes"]
    exp["variants"]["matrix"]["changes"] = {k: changes[k] for k in ("R2-A2-no-mtp", "R2-A5-no-prefix")}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp, allow_unicode=True))
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["variant"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert set(rows) == {"R2-A0", "R2-A2-no-mtp", "R2-A5-no-prefix"}
    assert all(r["status"] == "meets SLOs" for r in rows.values()), rows
    # MTP x2 at 75% acceptance decodes clearly faster than no MTP, even through the time-scaled server.
    assert float(rows["R2-A0"]["objective_mean"]) > 1.3 * float(rows["R2-A2-no-mtp"]["objective_mean"])


def test_estimates_prune_the_matrix_and_sim_time_is_reported(tmp_path: Path) -> None:
    """`estimate: {mode: prune, keep: 1}`: the simulator judges every variant, only the baseline and the best
    predicted change launch, the rest are reported as estimate only; figures measured through a 50x
    time-scaled sim-serve come back in simulated time (close to the estimate, not 50x off), and the winner
    prints a real `vllm serve` command."""
    import json

    exp = yaml.safe_load((ROOT / "examples/tune/qwen36-27b-2xa100-sim.yaml").read_text())
    exp["engine"]["flags"]["time-scale"] = 50
    exp["suite"] = {"repeats": 1, "warmup_requests": 1, "probes": {"decode_speed": {"output_tokens": 128}}}
    changes = exp["variants"]["matrix"]["changes"]
    exp["variants"]["matrix"]["changes"] = {k: changes[k] for k in ("R2-A2-no-mtp", "R2-A3-bf16-no-mtp", "R2-A4-mtp4")}
    exp["estimate"] = {"mode": "prune", "keep": 1}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp, allow_unicode=True))
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["variant"]: r for r in csv.DictReader((out / "summary.csv").open())}
    confirmed = {name for name in rows if name.endswith(" (confirm)")}
    assert confirmed == {"R2-A0 (confirm)", "R2-A4-mtp4 (confirm)"}, "a pruned run re-measures its finalists"
    assert all(rows[name]["status"] == "meets SLOs" for name in confirmed)
    rows = {name: row for name, row in rows.items() if name not in confirmed}
    assert set(rows) == {"R2-A0", "R2-A2-no-mtp", "R2-A3-bf16-no-mtp", "R2-A4-mtp4"}
    estimated = {name for name, r in rows.items() if r["estimated_only"] == "yes"}
    assert estimated == {"R2-A2-no-mtp", "R2-A3-bf16-no-mtp"}, "MTP x4 is predicted best: the no-MTP ones are pruned"
    predicted = "estimate.decode_speed.output_tok_s"
    for name, row in rows.items():
        assert float(row[predicted]) > 0, name
        if name in estimated:
            assert row["status"] == "estimate only" and row["objective_mean"] == "" and row["repeats"] == "1"
        else:
            assert row["status"] == "meets SLOs" and row["time_scale"] == "50"
            measured, guess = float(row["decode_speed.output_tok_s"]), float(row[predicted])
            assert 0.25 < measured / guess < 2, f"{name}: measured {measured} vs predicted {guess} tok/s"
    data = json.loads((out / "results.json").read_text())
    by_name = {v["name"]: v for v in data["variants"]}
    assert by_name["R2-A2-no-mtp"]["estimated_only"] and by_name["R2-A2-no-mtp"]["status"] == "skipped"
    assert "time-scale 50" in data["time_scale_note"]
    assert "estimate only" in (out / "summary.md").read_text()
    assert "estimate only" in (out / "report.html").read_text()
    rec = (out / "recommendation.txt").read_text()
    command = "\n".join(
        line for line in rec.splitlines() if not line.startswith("#")
    )  # the notes name what was dropped
    assert "vllm serve" in command and "--time-scale" not in command and "--gpu " not in command
    assert "--vllm-version" not in command
    assert "--acceptance-rate" not in command and "--tensor-parallel-size 2" in command
