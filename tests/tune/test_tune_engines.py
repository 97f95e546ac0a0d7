"""`servetune tune` on real CPU engines (llama.cpp via xllamacpp, vLLM CPU) with the tiny model: an engine
SIGKILLed mid-variant is recorded as failed with its excerpt and the next variant runs; an interrupted run
resumes without losing or repeating a finished run; the CPU example runs end to end."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servetune.report.files import write_outcome
from servetune.tune.loop import run_experiment
from servetune.tune.schema.loader import parse_experiment

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.engine

SMALL = """
name: small
engine:
  engine: llamacpp
  model: tiny
  flags: {ctx-size: 4096, parallel: 2, threads: 1}
client: {endpoint: completions, tokenizer: tiny}
suite:
  repeats: 2
  warmup_requests: 1
  probes:
    short_latency: {max_tokens: 8}
    decode_speed: {output_tokens: 32}
objective: decode_tok_s
variants:
  matrix:
    baseline: two-slots
    changes:
      four-slots: {parallel: 4}
      one-slot: {parallel: 1}
"""


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tiny_model: object) -> None:
    monkeypatch.setenv("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))


def _env() -> dict[str, str]:
    return {**os.environ, "SERVETUNE_CACHE": str(REPO / ".servetune-cache"), "PYTHONUNBUFFERED": "1"}


def test_sigkill_of_the_engine_fails_that_variant_and_the_next_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from servetune.engines.launch import launch
    from servetune.suite import registry, spec

    exp = parse_experiment(SMALL)
    engines: list = []

    def launcher(config, log_dir, timeout):  # the real launch, remembering the engine so the test can kill it
        engine = launch(config, log_dir=log_dir, startup_timeout_s=timeout)
        engines.append(engine)
        return engine

    decode = registry.get_probe("decode_speed")

    async def decode_then_killed(ctx, params):  # the real probe, with the engine SIGKILLed under it
        if engines[-1].cfg.flags.get("parallel") == 4:
            os.killpg(engines[-1].pid, signal.SIGKILL)
        return await decode.run(ctx, params)

    monkeypatch.setitem(spec.REGISTRY, "decode_speed", replace(decode, run=decode_then_killed))
    outcome = run_experiment(exp, tmp_path, emit=lambda _: None, launcher=launcher)
    by_name = {r.variant.name: r for r in outcome.records}
    killed = by_name["four-slots"]
    assert killed.status == "failed" and killed.failure is not None
    assert killed.failure.klass == "died_under_load" and killed.failure.during == "decode_speed"
    assert killed.failure.excerpt.strip(), "the log excerpt is kept"
    assert {run.probe for run in killed.runs} >= {"short_latency"}, "runs before the kill are kept"
    assert by_name["one-slot"].status == "done" and by_name["two-slots"].status == "done"
    assert all(not e.group.alive() for e in engines)


def test_a_frozen_engine_fails_its_variant_within_the_timeouts_and_the_next_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGSTOP: the process lives, its port accepts connections, nothing answers. The probe's request fails at the
    client's 5 s timeout, its `/metrics` read after it at 5 s too (the control calls never wait longer than a
    request may), the watchdog's one-token question at 5 s: the variant is `engine_hung` and the run goes on
    (0.1 waited out every later probe's timeouts, 94 s past `request_timeout_s: 20`)."""
    from dataclasses import replace

    from servetune.engines.launch import launch
    from servetune.suite import registry, spec

    exp = parse_experiment(SMALL.replace("tokenizer: tiny}", "tokenizer: tiny, request_timeout_s: 5}"))
    engines: list = []
    frozen_at: list[float] = []

    def launcher(config, log_dir, timeout):
        engine = launch(config, log_dir=log_dir, startup_timeout_s=timeout)
        engines.append(engine)
        return engine

    decode = registry.get_probe("decode_speed")

    async def decode_on_a_frozen_engine(ctx, params):
        if engines[-1].cfg.flags.get("parallel") == 4 and not frozen_at:
            os.killpg(engines[-1].pid, signal.SIGSTOP)
            frozen_at.append(time.monotonic())
        return await decode.run(ctx, params)

    monkeypatch.setitem(spec.REGISTRY, "decode_speed", replace(decode, run=decode_on_a_frozen_engine))
    failed_at: list[float] = []

    def emit(line: str) -> None:
        if line.startswith("FAILED four-slots"):
            failed_at.append(time.monotonic())

    outcome = run_experiment(exp, tmp_path, emit=emit, launcher=launcher)
    by_name = {r.variant.name: r for r in outcome.records}
    hung = by_name["four-slots"]
    assert hung.status == "failed" and hung.failure is not None
    assert hung.failure.klass == "engine_hung" and hung.failure.during == "decode_speed", hung.failure
    assert "no token within 5 s" in hung.failure.excerpt
    noticed = failed_at[0] - frozen_at[0]
    print(f"\nfrozen engine: variant failed {noticed:.1f} s after the SIGSTOP (3 waits of 5 s)")
    assert noticed < 3 * 5 + 10, f"{noticed:.1f} s: the frozen engine was not noticed within the timeouts"
    assert {run.probe for run in hung.runs} >= {"short_latency"}, "runs before the freeze are kept"
    assert by_name["one-slot"].status == "done" and by_name["two-slots"].status == "done"
    assert all(not e.group.alive() for e in engines), "the frozen engine was stopped"


def _runs(db: Path) -> dict[tuple[str, str, int], float]:
    """The finished runs in the store; none while servetune is still creating it."""
    with sqlite3.connect(db) as con:
        try:
            rows = con.execute("SELECT variant_key, probe, repeat, finished FROM runs").fetchall()
        except sqlite3.OperationalError:  # the file exists, its tables not yet
            return {}
        return {(k, p, r): f for k, p, r, f in rows}


def test_interrupted_run_resumes_without_losing_or_repeating_runs(tmp_path: Path) -> None:
    exp_file = tmp_path / "small.yaml"
    exp_file.write_text(SMALL)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "servetune", "tune", str(exp_file), "--out", str(out)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    db = out / "servetune.db"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if db.exists() and len(_runs(db)) >= 5:  # inside the second variant
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, output
    assert "--resume" in output and "Traceback" not in output
    before = _runs(db)
    assert 5 <= len(before) < 12

    again = subprocess.run([*cmd, "--resume"], env=_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    after = _runs(db)
    assert len(after) == 12, "3 variants × 2 probes × 2 repeats"
    assert {k: after[k] for k in before} == before, "finished runs are kept as they were, not re-measured"
    assert (out / "summary.csv").exists() and (out / "report.html").exists()

    (out / "summary.csv").unlink()
    report = subprocess.run(
        [sys.executable, "-m", "servetune", "report", str(out)], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert report.returncode == 0 and (out / "summary.csv").exists(), report.stderr


def test_invalid_experiment_is_rejected_before_any_launch(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.replace("parallel: 2, threads: 1", "paralel: 2, threads: one"))
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(bad), "--out", str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "bad.yaml:6:" in result.stderr and "did you mean --parallel" in result.stderr
    assert "whole number" in result.stderr
    assert not out.exists(), "nothing was launched or written"


def test_cpu_example_end_to_end(tmp_path: Path) -> None:
    """The demo's experiment (examples/tune/cpu-tiny.yaml) on real llama.cpp engines: every variant runs the suite
    five times and the reports are written; which variant wins is measured in benchmarks/demo_stability."""
    out = tmp_path / "cpu-tiny"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "servetune",
            "tune",
            str(REPO / "examples" / "tune" / "cpu-tiny.yaml"),
            "--out",
            str(out),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 5 and all(r["status"] for r in rows)
    data = json.loads((out / "results.json").read_text())
    done = [v for v in data["variants"] if v["status"] == "done"]
    assert len(done) == 5, [(v["name"], v["status"], v["failure"]) for v in data["variants"]]
    winner = data["winner"]
    assert winner is not None, data["reason"]
    figures = next(v for v in data["variants"] if v["name"] == winner)["figures"]
    measured = figures["load_curve.slo_max_concurrency"]
    assert measured["n"] == 5 and measured["mean"] > 0, "the objective comes from five measured repeats"
    levels = {p["concurrency"] for v in done for r in v["runs"] if r["probe"] == "load_curve" for p in r["points"]}
    assert levels == {2.0, 4.0, 8.0}, "every level runs (no stop at saturation)"
    rec = (out / "recommendation.txt").read_text()
    assert winner in rec and "llama-server" in rec
    assert "<svg" in (out / "report.html").read_text()


STAGES = """
name: stages
engine:
  engine: llamacpp
  model: tiny
  flags: {ctx-size: 4096, parallel: 1, threads: 1}
client: {endpoint: completions, tokenizer: tiny}
suite:
  repeats: 2
  warmup_requests: 0
  probes:
    decode_speed: {output_tokens: 32}
objective: decode_tok_s
variants:
  stages:
    - name: round1
      grid: {parallel: [1, 2]}
    - name: round2
      matrix: {baseline: r2-base, changes: {r2-batch: {batch-size: 256}}}
    - name: round3
      search: {space: {ubatch-size: {choice: [128, 256, 512]}}, budget_gpu_minutes: 5, max_trials: 2}
"""


def test_stages_and_search_build_on_the_previous_winner(tmp_path: Path) -> None:
    exp = parse_experiment(STAGES)
    outcome = run_experiment(exp, tmp_path, emit=lambda _: None)
    write_outcome(exp, outcome)
    stages = {}
    for record in outcome.records:
        stages.setdefault(record.variant.stage, []).append(record)
    assert [len(stages[s]) for s in ("round1", "round2")] == [2, 2]
    assert 1 <= len(stages["round3"]) <= 2
    from servetune.tune.results.rank import rank

    round1_winner = rank(exp, stages["round1"]).winner.record.variant.config
    base2 = next(r for r in stages["round2"] if r.variant.baseline).variant.config
    assert base2.flags == round1_winner.flags, "round 2 starts from round 1's winner"
    round2_winner = rank(exp, stages["round2"]).winner.record.variant.config
    for record in stages["round3"]:
        flags = {k: v for k, v in record.variant.config.flags.items() if k != "ubatch-size"}
        assert flags == round2_winner.flags and record.status == "done"
    assert (tmp_path / "report.html").exists() and outcome.ranking.winner is not None


def test_a_variant_that_cannot_start_is_recorded_and_the_next_runs(tmp_path: Path) -> None:
    text = (
        SMALL.replace("      one-slot: {parallel: 1}", "      broken: {no-such-flag: 1}")
        + "allow_unknown_flags: true\n"
    )
    exp = parse_experiment(text)
    outcome = run_experiment(exp, tmp_path, emit=lambda _: None)
    write_outcome(exp, outcome)
    by_name = {r.variant.name: r for r in outcome.records}
    broken = by_name["broken"]
    assert broken.status == "failed" and broken.failure.klass == "invalid_flag", broken.failure
    assert "no-such-flag" in broken.failure.excerpt and broken.failure.during == "launch"
    assert by_name["four-slots"].status == "done" and by_name["two-slots"].status == "done"
    report = (tmp_path / "report.html").read_text()
    assert "invalid_flag" in report and "no-such-flag" in report


def test_a_run_where_every_variant_fails_exits_1_and_counts_each_one(tmp_path: Path) -> None:
    """Every launch fails (a flag llama.cpp refuses): the progress used to stay at [1/3] and the run exited 0."""
    bad = tmp_path / "bad.yaml"
    text = SMALL.replace("threads: 1}", "threads: 1, no-such-flag: 1}") + "allow_unknown_flags: true\n"
    bad.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(bad), "--out", str(tmp_path / "out")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "none of the 3 variants succeeded (3 failed); the first, two-slots: invalid_flag" in result.stderr
    launching = [line.split("]")[0] for line in result.stderr.splitlines() if "launching engine" in line]
    assert launching == ["[1/3", "[2/3", "[3/3"], launching


CANARY = "sk-canary-4b3a2918"


def test_a_second_run_on_a_busy_folder_says_who_holds_it_and_sigterm_keeps_the_runs(tmp_path: Path) -> None:
    exp_file = tmp_path / "small.yaml"
    exp_file.write_text(SMALL.replace("  repeats: 2", "  repeats: 20"))  # long enough to be caught running
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "servetune", "tune", str(exp_file), "--out", str(out)]
    first = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    db = out / "servetune.db"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (db.exists() and _runs(db)):
        time.sleep(0.05)
    second = subprocess.run([*cmd, "--resume"], env=_env(), capture_output=True, text=True, timeout=60)
    assert second.returncode == 2, second.stdout + second.stderr
    assert str(first.pid) in second.stderr and "Traceback" not in second.stderr, second.stderr
    first.send_signal(signal.SIGTERM)  # what a scheduler or `kill` sends: the same as Ctrl-C
    output = first.communicate(timeout=60)[0]
    assert first.returncode == 130, output
    assert "--resume" in output
    assert _runs(db), "the finished runs are kept"


def test_a_canary_secret_reaches_no_file_tune_writes(tmp_path: Path) -> None:
    """An API key as client setting and engine flag, and a token in the engine's environment: every file of
    the experiment folder (the SQLite store, engine logs, results.json, summary.md/csv, report.html, the
    recommendation) is searched for them."""
    exp_file = tmp_path / "secret.yaml"
    exp_file.write_text(
        SMALL.replace("  flags: {ctx-size: 4096, parallel: 2, threads: 1}", f"  flags: {{ctx-size: 4096, parallel: 2, threads: 1, api-key: {CANARY}}}\n  env: {{HF_TOKEN: {CANARY}-env}}")
        .replace("client: {endpoint: completions, tokenizer: tiny}", f"client: {{endpoint: completions, tokenizer: tiny, api_key: {CANARY}}}")
        .replace("      four-slots: {parallel: 4}\n      one-slot: {parallel: 1}\n", "      four-slots: {parallel: 4}\n")
        .replace("  repeats: 2", "  repeats: 1")
    )  # fmt: skip
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(exp_file), "--out", str(out)],
        env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = subprocess.run(
        [sys.executable, "-m", "servetune", "report", str(out)], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert report.returncode == 0, report.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) >= 5 and any(p.suffix == ".log" for p in files), files
    leaked = [str(p) for p in files if CANARY.encode() in p.read_bytes()]
    assert not leaked, f"the secret was written to {leaked}"
    assert CANARY not in done.stdout + done.stderr + report.stdout + report.stderr
