"""The simulator judges variants before launch (order, prune), and results measured against a time-scaled
simulator are converted once into simulated time."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
import yaml

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.load.backend import ClientSpec
from servetune.metrics.slo import wall_clock_slos
from servetune.suite.registry import get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import to_simulated_time
from servetune.tune.execution.session import time_scale
from servetune.tune.results.result import RunResult
from servetune.tune.results.store import Store
from servetune.tune.schema.experiment import Change, Matrix
from servetune.tune.schema.loader import parse_experiment
from servetune.tune.schema.variants import Variant, grid_variants, matrix_variants
from servetune.tune.search.estimates import ESTIMATE_PROBE, judge, predictor
from servetune.tune.search.order import order_by_estimate, prune_by_estimate

ROOT = Path(__file__).resolve().parents[2]
SIM_EXAMPLE = ROOT / "examples" / "tune" / "qwen36-27b-2xa100-sim.yaml"


def _variants() -> list[Variant]:
    base = EngineConfig(engine="sim", model="m", flags={"max-num-seqs": 2})
    changes = {name: Change(flags={"max-num-seqs": seqs}) for name, seqs in (("s1", 1), ("s3", 3), ("s4", 4))}
    return matrix_variants(base, ClientSpec(), Matrix(baseline="A0", changes=changes))


def test_order_and_prune_by_predicted_objective() -> None:
    a0, s1, s3, s4 = _variants()
    standings = {a0.key(): (0.0, -10.0), s1.key(): (0.0, -5.0), s3.key(): (0.0, -30.0), s4.key(): None}
    ordered = order_by_estimate([a0, s1, s3, s4], standings)
    assert [v.name for v in ordered] == ["A0", "s3", "s1", "s4"], "baseline first, best next, unjudged last"
    launch, pruned = prune_by_estimate([a0, s1, s3, s4], standings, keep=1)
    assert [v.name for v in launch] == ["A0", "s3", "s4"], "the baseline and unjudged variants always launch"
    assert [v.name for v in pruned] == ["s1"]


SLO_EXPERIMENT = """
name: slo-prune
engine:
  engine: sim
  model: qwen3.5-4b
  flags: {gpu: L40S, max-model-len: 8192, max-num-seqs: 64}
hardware: {gpu: L40S, count: 1}
suite:
  repeats: 1
  warmup_requests: 0
  probes:
    fixed_load: {concurrency: 64, requests: 128, input_tokens: 512, output_tokens: 64}
slos: {tpot_p99_ms: TPOT}
objective: {probe: fixed_load, figure: output_tok_s}
variants: {grid: {max-num-seqs: [64, 8, 16, 32]}}
estimate: {mode: prune, keep: 1}
"""


def _judged(tpot_p99_ms: float) -> tuple[list[str], list[str], dict[str, str]]:
    exp = parse_experiment(SLO_EXPERIMENT.replace("TPOT", str(tpot_p99_ms)))
    base = EngineConfig(engine="sim", model=exp.engine.model, flags=exp.engine.flags)
    assert exp.variants.grid is not None
    variants = grid_variants(base, ClientSpec(), exp.variants.grid)
    predict = predictor(exp)
    verdict = judge(exp, variants, {v.key(): predict(v.config) for v in variants})
    names = {v.key(): v.name for v in variants}
    return (
        [v.name for v in verdict.launch],
        [v.name for v in verdict.pruned],
        {names[k]: n for k, n in verdict.notes.items()},
    )


def test_prune_drops_the_variants_predicted_to_miss_the_slo_first() -> None:
    """Output tok/s at 64 streams under a TPOT p99 SLO of 30 ms, on the simulator: more running sequences decode
    more tokens a second and each one slower (predicted TPOT p99 23 / 29 / 46 / 74 ms at max-num-seqs 8 / 16 / 32 /
    64). Keeping the one best by tok/s kept max-num-seqs 32, predicted 55% past the SLO: a launch spent on a
    variant the ranking will drop. Predicted misses go last, least miss first; the rest by the objective."""
    launch, pruned, notes = _judged(30)
    assert launch == ["max-num-seqs=64", "max-num-seqs=16"], "the baseline always launches; then the fastest that fits"
    assert pruned == ["max-num-seqs=8", "max-num-seqs=32"], "the slower fit first, the predicted miss last"
    assert "predicted to miss the SLOs by more than 25%: tpot_p99_ms 46.4 > 30" in notes["max-num-seqs=32"], notes
    assert "#3 of 3" in notes["max-num-seqs=32"] and "miss" not in notes["max-num-seqs=16"], notes


def test_a_variant_predicted_just_past_the_slo_is_judged_by_its_objective() -> None:
    """Inside the margin (max-num-seqs 32's predicted 46 ms against a 40 ms bound: 16% past) the prediction is
    not trusted to call a miss: it ranks by its predicted tok/s, as every variant did before SLOs were judged."""
    launch, pruned, notes = _judged(40)
    assert launch == ["max-num-seqs=64", "max-num-seqs=32"] and pruned == ["max-num-seqs=16", "max-num-seqs=8"]
    assert "miss" not in notes["max-num-seqs=32"], notes


def _sim_experiment(**estimate: object) -> str:
    data = yaml.safe_load(SIM_EXAMPLE.read_text())
    data["estimate"] = estimate
    return yaml.safe_dump(data, allow_unicode=True)


def test_the_simulator_predicts_the_objective_of_each_variant() -> None:
    exp = parse_experiment(_sim_experiment(mode="order"))
    predict = predictor(exp)
    base = EngineConfig(engine="sim", model=exp.engine.model, flags=exp.engine.flags, version=exp.engine.version)
    mtp = predict(base)
    no_mtp = predict(base.with_flags(**{"speculative-config": None}))
    assert mtp.objective is not None and no_mtp.objective is not None
    assert mtp.objective > 1.3 * no_mtp.objective, "MTP x2 at 75% acceptance decodes faster"
    assert set(mtp.figures) >= {"decode_speed.output_tok_s", "decode_speed.tpot_ms"}
    result = mtp.as_result("note")
    assert result.probe == ESTIMATE_PROBE and result.ok
    unknown = predict(EngineConfig(engine="vllm", model="/no/such/model", flags={}))
    assert unknown.objective is None and unknown.reason
    assert predict(EngineConfig(engine="llamacpp", model="x.gguf")).objective is None


@pytest.mark.parametrize(
    ("estimate", "objective", "says"),
    [
        ({"mode": "prune"}, None, "needs keep"),
        ({"mode": "order", "keep": 2}, None, "keep only applies"),
        ({"mode": "order"}, {"probe": "memory_headroom", "figure": "headroom_pct"}, "cannot predict"),
        ({"mode": "order", "calibration": "/no/such/profile.json"}, None, "does not exist"),
        ({"mode": "sometimes"}, None, "estimate.mode"),
    ],
)
def test_bad_estimate_settings_are_rejected(estimate: dict, objective: dict | None, says: str) -> None:
    data = yaml.safe_load(_sim_experiment(**estimate))
    if objective:
        data["objective"] = objective
    with pytest.raises(ServetuneError) as info:
        parse_experiment(yaml.safe_dump(data, allow_unicode=True), "exp.yaml")
    assert says in str(info.value) and "exp.yaml:" in str(info.value)


def test_time_scaled_results_are_converted_to_simulated_time() -> None:
    sim = EngineConfig(engine="sim", model="m", flags={"time-scale": 20})
    assert time_scale(sim) == 20.0
    assert time_scale(EngineConfig(engine="vllm", model="m", flags={"time-scale": 20})) == 1.0
    assert time_scale(EngineConfig(engine="sim", model="m")) == 1.0
    measured = ProbeResult(
        probe="load_curve",
        figures={
            "goodput_rps": 40.0,
            "max_output_tok_s": 2000.0,
            "saturation_concurrency": 8.0,
            "slo_output_tok_s": None,
        },
        points=[{"concurrency": 4.0, "request_rps": 20.0, "ttft_p99_ms": 10.0, "error_rate": 0.0}],
    )
    curve = get_probe("load_curve")
    out = to_simulated_time(curve, measured, 20.0)
    assert out.figures == {
        "goodput_rps": 2.0,
        "max_output_tok_s": 100.0,
        "saturation_concurrency": 8.0,
        "slo_output_tok_s": None,
    }, "rates ÷ 20, counts as they are: by each figure's declared scaling, not by its name"
    assert out.points == [{"concurrency": 4.0, "request_rps": 1.0, "ttft_p99_ms": 200.0, "error_rate": 0.0}]
    assert any("time-scale 20" in note for note in out.notes)
    assert to_simulated_time(curve, measured, 1.0) is measured
    prefill = to_simulated_time(
        get_probe("long_prefill"), ProbeResult(probe="long_prefill", figures={"ttft_s": 0.01}), 20
    )
    assert prefill.figures["ttft_s"] == pytest.approx(0.2)
    assert wall_clock_slos({"ttft_p99_ms": 2000.0, "error_rate": 0.0, "memory_headroom_pct": 5.0}, 20.0) == {
        "ttft_p99_ms": 100.0,
        "error_rate": 0.0,
        "memory_headroom_pct": 5.0,
    }


def test_the_store_keeps_the_time_scale_and_reads_old_folders(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:  # a store written before runs recorded the time scale
        db.execute(
            "CREATE TABLE runs (variant_key TEXT NOT NULL, probe TEXT NOT NULL, repeat INTEGER NOT NULL,"
            " result TEXT NOT NULL, wall_s REAL NOT NULL, finished REAL NOT NULL,"
            " PRIMARY KEY (variant_key, probe, repeat))"
        )
        db.execute(
            "INSERT INTO runs VALUES ('k', 'decode_speed', 0, ?, 1.0, 0)",
            (ProbeResult(probe="decode_speed").model_dump_json(),),
        )
    store = Store(old)
    store.add_run(
        RunResult(
            variant_key="k",
            probe="decode_speed",
            repeat=1,
            wall_s=1.0,
            time_scale=20.0,
            result=ProbeResult(probe="decode_speed", figures={"output_tok_s": 50.0}),
        )
    )
    runs = {r.repeat: r for r in store.runs("k")}
    store.close()
    assert runs[0].time_scale == 1.0 and runs[1].time_scale == 20.0
    assert math.isclose(runs[1].result.figures["output_tok_s"], 50.0), "stored as given: never converted twice"


def test_check_shows_the_estimated_order_and_what_prune_leaves_out() -> None:
    from servetune.tune.loop import default_feasibility
    from servetune.tune.search.plan import plan_experiment

    data = yaml.safe_load(_sim_experiment(mode="prune", keep=1))
    changes = data["variants"]["matrix"]["changes"]
    data["variants"]["matrix"]["changes"] = {k: changes[k] for k in ("R2-A2-no-mtp", "R2-A4-mtp4", "R2-B3-seqs-1")}
    exp = parse_experiment(yaml.safe_dump(data, allow_unicode=True))
    lines = plan_experiment(exp, feasibility=default_feasibility(exp), predictor=predictor(exp)).lines()
    rows = [line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("  ·")]
    assert rows == ["R2-A0", "R2-A4-mtp4", "R2-B3-seqs-1", "R2-A2-no-mtp"], lines
    assert "2 judged by estimate only" in lines[2] and lines[2].startswith("  · estimate:"), lines
    assert "estimate only: predicted decode_speed.output_tok_s" in lines[-2] + lines[-3]


def test_changing_the_estimate_setting_makes_another_experiment() -> None:
    from servetune.tune.loop import fingerprint

    exp = parse_experiment(SIM_EXAMPLE.read_text())
    off = exp.model_copy(update={"estimate": type(exp.estimate)()})
    assert fingerprint(exp) != fingerprint(off), "the example orders by estimate: a resume must not mix the two"
