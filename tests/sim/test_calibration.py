"""Calibration recovers the speeds of measured runs, and `servetune calibrate`/`estimate` work as commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.load.shape import LoadShape
from servetune.metrics.record import RequestRecord
from servetune.plan.roofline import Efficiency
from servetune.sim.calibration import (
    PARTS,
    MeasuredRun,
    fit_coefficients,
    measured_summary,
    relative_errors,
    replay,
    replay_all,
    replay_launch,
    run_errors,
    simulated_summary,
)
from servetune.sim.fitting import deployment_for, runs_from_dir
from servetune.sim.profile import CalibrationProfile
from servetune.sim.results import measured_run, to_record
from servetune.sim.steptime import StepCoefficients

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--max-model-len", "32768", "--language-model-only"]
TRUTH = StepCoefficients(
    efficiency=Efficiency(bandwidth=0.85, mfu_prefill=0.45, step_overhead_s=0.001),
    per_seq_overhead_s=5e-5,
    request_overhead_s=0.008,
)
POINTS = {"decode": (1, [(1024, 128)] * 3), "prefill": (1, [(8192, 8)] * 2), "load": (16, [(512, 64)] * 32)}


def write_measured(directory: Path) -> None:
    """Result files as `servetune bench --jsonl --json` writes them, from a 'real engine' with TRUTH coefficients:
    RequestRecord JSON lines, the concurrency in the LoadResult JSON beside them (`shape.concurrency`)."""
    directory.mkdir(parents=True)
    (directory / "flags.txt").write_text("\n".join(FLAGS) + "\n")
    dep = deployment_for("qwen3.6-27b", "H200", "0.24.0", FLAGS)
    for name, (conc, lengths) in POINTS.items():
        asked = tuple(RequestRecord(index=i, prompt_tokens=p, output_tokens=o) for i, (p, o) in enumerate(lengths))
        records = replay(MeasuredRun(name, LoadShape.closed(conc, requests=len(asked)), asked, dep), TRUTH)
        (directory / f"{name}.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
        (directory / f"{name}.json").write_text(json.dumps({"shape": {"kind": "concurrency", "concurrency": conc}}))


def test_fit_recovers_measured_speeds(tmp_path: Path) -> None:
    write_measured(tmp_path / "A")
    runs = runs_from_dir(tmp_path / "A", "qwen3.6-27b", "H200", "0.24.0")
    before = {r.name: relative_errors(simulated_summary(r, StepCoefficients()), measured_summary(r)) for r in runs}
    _, errors = fit_coefficients(runs, iters=80)
    worst_before = max(abs(e) for errs in before.values() for e in errs.values())
    worst_after = max(abs(e) for errs in errors.values() for e in errs.values())
    assert worst_before > 0.1
    assert worst_after < 0.05, errors


def test_a_fit_by_part_matches_the_ttfts_parts_too() -> None:
    """With `by_part`, the fit also matches the engine's split of each run's mean TTFT (prefill, and the wait
    before it) where the run has one: the parts come back among the errors, small after the fit."""
    dep = deployment_for("qwen3.6-27b", "H200", "0.24.0", FLAGS)
    runs = []
    for name, (conc, lengths) in POINTS.items():
        asked = tuple(RequestRecord(index=i, prompt_tokens=p, output_tokens=o) for i, (p, o) in enumerate(lengths))
        run = MeasuredRun(name, LoadShape.closed(conc, requests=len(asked)), asked, dep, launch=name)
        truth = replay_launch([run], TRUTH, account=True)[name]
        runs.append(replace(run, records=tuple(truth.records), engine_time=truth.engine_time))
    default = replay_all(runs, StepCoefficients(), intervals_only=True)
    before = {r.name: run_errors(r, default[r.name], by_part=True) for r in runs}
    assert all(set(PARTS) <= set(errs) for errs in before.values())
    assert max(abs(e) for errs in before.values() for e in errs.values()) > 0.1
    _, errors = fit_coefficients(runs, iters=80, by_part=True)
    assert all(set(PARTS) <= set(errs) for errs in errors.values())
    assert max(abs(e) for errs in errors.values() for e in errs.values()) < 0.1, errors


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
        check=False,
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
        check=False,
        timeout=120,
    )
    assert est.returncode == 0, est.stderr
    assert json.loads(est.stdout)["summary"]["completed"] == 50
    bad = subprocess.run(
        [sys.executable, "-m", "servetune", "estimate", "qwen3.6-27b", "--gpu", "H200", "--concurrency", "0"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--concurrency" in bad.stderr


def test_reads_the_fidelity_campaigns_older_records(tmp_path: Path) -> None:
    """`warmup`/`end_ns`/`error` records with a `concurrency` field (benchmarks/device), and a record missing
    chunks: its load counts, its TTFT does not."""
    rows = [
        {"index": 0, "warmup": True, "concurrency": 2, "prompt_tokens": 10, "sent_ns": 1, "end_ns": 9,
         "output_tokens": 1},
        {"index": 1, "warmup": False, "concurrency": 2, "prompt_tokens": 100, "sent_ns": 10, "chunk_ns": [20, 30],
         "end_ns": 30, "output_tokens": 2, "max_tokens": 2, "error": None, "chunk_tokens": [1, 1]},
        {"index": 2, "warmup": False, "concurrency": 2, "prompt_tokens": 100, "sent_ns": 11, "chunk_ns": [40],
         "end_ns": 50, "output_tokens": 2, "error": None},
        {"index": 3, "warmup": False, "concurrency": 2, "prompt_tokens": 100, "sent_ns": 12, "end_ns": 13,
         "output_tokens": 0, "error": "boom"},
    ]  # fmt: skip
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert to_record(rows[0]).phase == "warmup" and to_record(rows[3]).error == "boom"
    run = measured_run(path, deployment_for("qwen3.6-27b", "H200", "0.24.0", FLAGS))
    assert run.shape == LoadShape.closed(2, requests=2, warmup_requests=1)
    assert [r.index for r in run.records] == [0, 1, 2] and [r.index for r in run.measured] == [1, 2]
    assert run.untimed == {1}
    s = measured_summary(run)
    assert s.ttft_ms.count == 1 and s.ttft_ms.p50 == 10 / 1e6 and s.output_tokens == 4


def test_bad_result_files_are_clear_errors(tmp_path: Path) -> None:
    dep = deployment_for("qwen3.6-27b", "H200", "0.24.0", FLAGS)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(ServetuneError, match=r"broken\.jsonl:1 is not JSON"):
        measured_run(broken, dep)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ServetuneError, match="cannot be read as text"):
        measured_run(binary, dep)
    record = RequestRecord(index=0, sent_ns=1, chunk_ns=[2, 3], done_ns=3, prompt_tokens=5, output_tokens=2)
    open_loop = tmp_path / "open.jsonl"
    open_loop.write_text(record.model_dump_json() + "\n")
    (tmp_path / "open.json").write_text(json.dumps({"shape": {"kind": "rate", "rate": 2.0, "seed": 3}}))
    assert measured_run(open_loop, dep).shape == LoadShape.open(2.0, requests=1, seed=3)  # replayed at its arrivals
    (tmp_path / "odd.json").write_text(json.dumps({"shape": {"kind": "rate"}}))
    (tmp_path / "odd.jsonl").write_text(record.model_dump_json() + "\n")
    assert measured_run(tmp_path / "odd.jsonl", dep).shape.rate == float("inf")  # LoadResult JSON's infinity
    lonely = tmp_path / "lonely.jsonl"
    lonely.write_text(record.model_dump_json() + "\n")
    with pytest.raises(ServetuneError, match="no load shape"):
        measured_run(lonely, dep)


def test_a_cpu_engine_is_estimated_on_its_calibrated_device(tmp_path: Path) -> None:
    """vLLM CPU has no GPU to name: a profile fitted with `--gpu custom:...` carries the device, and `estimate:`
    in an experiment without hardware.gpu simulates it (benchmarks/guided_tuning)."""
    from servetune.tune.schema.loader import parse_experiment
    from servetune.tune.search.estimates import predictor

    device = "custom:mem=6,bw=20,tflops=0.2"
    profile = CalibrationProfile(gpu="custom", device=device, model="tiny", coefficients=StepCoefficients())
    profile.save(tmp_path / "cpu.json")
    text = json.dumps(
        {
            "name": "cpu",
            "engine": {"engine": "vllm", "model": "tiny", "flags": {"max-model-len": 1024, "max-num-seqs": 2}},
            "suite": {"probes": {"load_curve": {"concurrency": [1, 2], "requests_per_point": 4}}},
            "objective": "output_throughput",
            "estimate": {"mode": "prune", "keep": 1, "calibration": str(tmp_path / "cpu.json")},
            "variants": {"grid": {"max-num-seqs": [2, 4]}},
        }
    )
    exp = parse_experiment(text)
    assert exp.hardware.gpu is None
    got = predictor(exp)(EngineConfig(engine="vllm", model="tiny", flags={"max-model-len": 1024, "max-num-seqs": 4}))
    assert got.objective is not None and got.objective > 0, got.reason
    without = json.loads(text)
    del without["estimate"]["calibration"]
    with pytest.raises(ServetuneError, match="estimates need the GPU to simulate"):
        parse_experiment(json.dumps(without))


def test_an_impossible_profile_is_refused_and_not_written(tmp_path: Path) -> None:
    """Runs measured on an H200, calibrated as if on an A100: the fit needs more than the A100's peak bandwidth
    (it saved 1.19 with fit errors of +333%/+1193%, exit 0). It is refused, exit 1, with the fix, and no file."""
    write_measured(tmp_path / "A")
    out = tmp_path / "profile.json"
    cal = subprocess.run(
        [sys.executable, "-m", "servetune", "calibrate", str(tmp_path / "A"), "--model", "qwen3.6-27b",
         "--gpu", "A100-80G-SXM", "--vllm-version", "0.24.0", "--iters", "20", "--out", str(out)],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), timeout=300,
    )  # fmt: skip
    assert cal.returncode == 1, cal.stdout + cal.stderr
    assert "of the hardware's peak (at most 100% is possible)" in cal.stderr and "no profile written" in cal.stderr
    assert "fix: give the --gpu" in cal.stderr and "Traceback" not in cal.stderr
    assert not out.exists()


def test_a_fit_that_misses_by_more_than_the_bound_is_refused() -> None:
    from servetune.sim.fitting import MAX_FIT_ERROR, ImpossibleProfile, check_profile

    check_profile(StepCoefficients(), {"A/decode": {"ttft_p50_s": MAX_FIT_ERROR}}, "--gpu H200")
    with pytest.raises(ImpossibleProfile, match=r"misses A/load output_throughput by \+1193%") as err:
        check_profile(StepCoefficients(), {"A/load": {"output_throughput": 11.93, "ttft_p50_s": 3.33}}, "--gpu H200")
    assert err.value.exit_code == 1
    with pytest.raises(ImpossibleProfile, match="bandwidth 119%"):
        check_profile(StepCoefficients(efficiency=Efficiency(bandwidth=1.19)), {}, "--gpu H200")
