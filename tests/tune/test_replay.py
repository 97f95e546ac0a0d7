"""Executor `replay`: a tune answered from a measured table. Each variant's figures are draws of its measured
repeats (seeded: the same seed gives the same run), its GPU time is its measured launch + warm-up + the drawn
repeats' seconds, and every strategy of the tuner — grid, TPE and random search, the simulator's pruning — runs
unchanged against the committed H200 table; a cell or a load the table did not measure is named."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from servetune.errors import ServetuneError
from servetune.tune.loop import run_experiment
from servetune.tune.results.stats import delta, estimate
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.loader import load_experiment

REPO = Path(__file__).resolve().parents[2]
H200_TABLE = REPO / "benchmarks" / "tuning_table"
B_PROBE = {
    "rate": 10,
    "requests": 96,
    "input_tokens": 512,
    "output_tokens": 128,
    "spread": 0.25,
    "goodput": {"ttft_ms": 1000, "tpot_ms": 60},
}
BASE_FLAGS = {"max-model-len": 32768, "kv-cache-dtype": "auto", "max-num-batched-tokens": 8192, "max-num-seqs": 256}


def experiment(table: Path, variants: dict[str, Any], seed: int = 0, **extra: Any) -> Experiment:
    return Experiment.model_validate(
        {
            "name": "replay",
            "engine": {"engine": "vllm", "model": "qwen3.6-27b", "version": "0.24.0", "flags": BASE_FLAGS},
            "hardware": {"gpu": "H200"},
            "suite": {"repeats": 3, "warmup_requests": 0, "probes": {"fixed_load": B_PROBE}},
            "objective": {"probe": "fixed_load", "figure": "goodput_rps"},
            "variants": variants,
            "executor": {"kind": "replay", "table": str(table), "seed": seed},
            **extra,
        }
    )


def small_table(folder: Path, relaunched: bool = False) -> Path:
    """Two measured variants of max-num-seqs: starts of 100 s and 200 s, a 5 s warm-up, three repeats each; with
    `relaunched`, mns-256 launched a second time, its three repeats there 0.5 above the first launch's."""
    folder.mkdir()
    grid = {
        "table": "small",
        "factors": {"max-num-seqs": [256, 64]},
        "variants": [{"id": f"mns-{n}", "factors": {"max-num-seqs": n}} for n in (256, 64)],
        "probes": {
            "b": {
                "objective": "b",
                "kind": "poisson",
                "rate": 10.0,
                "requests": 96,
                "input_tokens": 512,
                "output_tokens": 128,
                "spread": 0.25,
            }
        },
        "slos": {"b": {"ttft_ms": 1000, "tpot_ms": 60}},
    }
    (folder / "grid.json").write_text(json.dumps(grid))
    with open(folder / "variants.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "outcome", "ready_s", "warmup_s", "compile_cache", "kv_cache_tokens"])
        w.writerows([["mns-256", "ready", 100, 5, "cold", 1000], ["mns-64", "ready", 200, 5, "cold", 1000]])
    with open(folder / "table.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["variant", "probe", "repeat", "launch", "outcome", "goodput_req_s", "ttft_p99_ms", "completed", "wall_s"]
        )
        launches = (("mns-256", 8.0, 1), ("mns-64", 6.0, 1)) + ((("mns-256", 8.5, 2),) if relaunched else ())
        for vid, base, launch in launches:
            for k in (1, 2, 3):
                w.writerow([vid, "b", k, launch, "ok", base + k / 10, 500, 96, 9 + k])
    return folder


def _runs(outcome: Any) -> dict[str, list[float]]:
    return {
        r.variant.name: [run.result.figures["goodput_rps"] for run in sorted(r.runs, key=lambda x: x.repeat)]
        for r in outcome.records
    }


def test_a_grid_is_answered_from_the_table_and_charged_its_measured_time(tmp_path: Path) -> None:
    table = small_table(tmp_path / "table")
    exp = experiment(table, {"grid": {"max-num-seqs": [256, 64]}}, seed=7)
    outcome = run_experiment(exp, tmp_path / "a", emit=lambda _: None)
    by_name = {r.variant.name: r for r in outcome.records}
    for name, ready, base in (("max-num-seqs=256", 100, 8.0), ("max-num-seqs=64", 200, 6.0)):
        record = by_name[name]
        drawn = [run.result.figures["goodput_rps"] for run in record.runs]
        assert record.status == "done" and len(drawn) == 3
        assert set(drawn) <= {base + 0.1, base + 0.2, base + 0.3}, "each figure is one of the measured repeats"
        walls = [9 + round((g - base) * 10) for g in drawn]
        assert record.gpu_minutes == pytest.approx((ready + 5 + sum(walls)) / 60), "launch + warm-up + repeats"
        assert record.facts["kv_cache_tokens"] == 1000 and "replay of small" in (record.ran_on or "")
    assert outcome.ranking.winner is not None and outcome.ranking.winner.record.variant.name == "max-num-seqs=256"
    again = run_experiment(exp, tmp_path / "b", emit=lambda _: None)
    assert _runs(again) == _runs(outcome), "the same seed draws the same repeats"
    others = [
        _runs(
            run_experiment(
                exp.model_copy(update={"executor": exp.executor.model_copy(update={"seed": s})}),
                tmp_path / f"s{s}",
                emit=lambda _: None,
            )
        )
        for s in range(4)
    ]
    assert any(o != _runs(outcome) for o in others), "another seed draws other repeats"


def test_repeat_r_of_every_variant_is_answered_with_the_same_measured_repeat(tmp_path: Path) -> None:
    """The table's repeat k of every cell was measured on the same arrival draw, as a tune's repeat r of every
    variant is: the replay draws k per repeat, not per variant, and the ranking compares the variants repeat by
    repeat. On the H200 table's goodput (±22% per repeat, alike in both cells) the paired interval of mns 64
    against mns 256 is under half the one the same figures get as two independent samples (2.5-8x narrower)."""
    grid = {"grid": {"max-num-seqs": [256, 64]}}
    for seed in range(6):
        outcome = run_experiment(experiment(H200_TABLE, grid, seed=seed), tmp_path / f"s{seed}", emit=lambda _: None)
        drawn = {
            r.variant.name: [run.result.draw for run in sorted(r.runs, key=lambda x: x.repeat)] for r in outcome.records
        }
        first, second = drawn.values()
        assert first == second and all(d and "b_goodput repeat" in d for d in first), drawn
        base, other = sorted(outcome.ranking.entries, key=lambda e: not e.record.variant.baseline)
        key = ("fixed_load", "goodput_rps")
        paired = other.deltas[key]
        unpaired = delta(*(estimate([v for _, v in e.figures[key].draws]) for e in (other, base)))  # type: ignore[misc]
        assert paired.paired and unpaired is not None and not unpaired.paired
        print(
            seed,
            first,
            f"paired {paired.pct:+.1f}% ± {paired.half_width_pct:.1f}%, as independent samples ± "
            f"{unpaired.half_width_pct:.1f}%",
        )
        assert paired.half_width_pct <= unpaired.half_width_pct / 2


def test_a_cell_measured_in_two_launches_answers_repeat_k_from_either(tmp_path: Path) -> None:
    """A variant launched twice (a relaunch measured it again) has a repeat k of each launch: both are answers of
    draw k (the replay used to answer every k with the first launch's and never the second's), and repeat r of every
    variant is still answered with the same k."""
    table = small_table(tmp_path / "table", relaunched=True)
    drawn: set[float] = set()
    for seed in range(12):
        exp = experiment(table, {"grid": {"max-num-seqs": [256, 64]}}, seed=seed)
        outcome = run_experiment(exp, tmp_path / f"s{seed}", emit=lambda _: None)
        runs = {r.variant.name: sorted(r.runs, key=lambda x: x.repeat) for r in outcome.records}
        first, second = runs["max-num-seqs=256"], runs["max-num-seqs=64"]
        assert [r.result.draw for r in first] == [r.result.draw for r in second], "paired by the load draw k"
        for run in first:
            k = int((run.result.draw or "").rsplit(" ", 1)[1])
            value = run.result.figures["goodput_rps"]
            assert value in (pytest.approx(8.0 + k / 10), pytest.approx(8.5 + k / 10)), "one of the two repeats k"
            drawn.add(round(value, 2))
    assert drawn & {8.1, 8.2, 8.3} and drawn & {8.6, 8.7, 8.8}, f"both launches answer: {sorted(drawn)}"


def test_every_strategy_runs_unchanged_against_the_measured_h200_table(tmp_path: Path) -> None:
    calibration = REPO / "benchmarks/device_campaign/profiles/h200_qwen3.6-27b_vllm0.24.0.json"
    strategies = {
        "grid": experiment(H200_TABLE, {"grid": {"max-num-seqs": [256, 64]}}),
        "prune": experiment(
            H200_TABLE,
            {"grid": {"max-num-seqs": [256, 64]}},
            estimate={"mode": "prune", "keep": 1, "calibration": str(calibration)},
        ),
    }
    for sampler in ("tpe", "random"):
        space = {"max-num-seqs": {"choice": [256, 64]}}
        search = {"space": space, "budget_gpu_minutes": 30, "max_trials": 4, "seed": 3, "sampler": sampler}
        strategies[sampler] = experiment(H200_TABLE, {"search": search})
    for name, exp in strategies.items():
        outcome = run_experiment(exp, tmp_path / name, emit=lambda _: None)
        done = [r for r in outcome.records if r.status == "done"]
        assert done and outcome.ranking.winner is not None, name
        assert all(r.gpu_minutes > 3.5 for r in done), f"{name}: a measured H200 start is ~230 s"
        confirmed = [r for r in done if r.variant.confirms]
        searched = name in ("tpe", "random")
        assert bool(confirmed) == searched, f"{name}: auto confirms a search (keep 1 of 2 pruned nothing)"
        assert bool(outcome.ranking.winner.record.variant.confirms) == searched


def test_a_cell_the_table_did_not_measure_fails_named(tmp_path: Path) -> None:
    changes = {"mnbt-2048": {"max-num-batched-tokens": 2048}}
    exp = experiment(H200_TABLE, {"matrix": {"baseline": "base", "changes": changes}})
    outcome = run_experiment(exp, tmp_path / "x", emit=lambda _: None)
    missing = next(r for r in outcome.records if r.variant.name == "mnbt-2048")
    assert missing.status == "failed" and missing.failure is not None and missing.failure.klass == "not_in_table"
    assert "max-num-batched-tokens" in missing.failure.excerpt and missing.gpu_minutes == 0


def test_a_load_the_table_did_not_measure_is_refused(tmp_path: Path) -> None:
    exp = experiment(H200_TABLE, {"grid": {"max-num-seqs": [256, 64]}})
    suite = exp.suite.model_copy(update={"probes": type(exp.suite.probes).model_validate({"fixed_load": {"rate": 5}})})
    with pytest.raises(ServetuneError, match=r"no measurement of suite\.probes\.fixed_load") as err:
        run_experiment(exp.model_copy(update={"suite": suite}), tmp_path / "y", emit=lambda _: None)
    assert "b_goodput" in (err.value.fix or ""), "the message lists what the table measured"


def test_the_executor_keys_belong_to_their_kind() -> None:
    with pytest.raises(ValidationError, match="executor replay needs table"):
        Experiment.model_validate(
            {"name": "x", "engine": {"model": "m"}, "variants": {"grid": {"a": [1]}}, "executor": "replay"}
        )
    with pytest.raises(ValidationError, match="table and seed are for executor replay"):
        Experiment.model_validate(
            {
                "name": "x",
                "engine": {"model": "m"},
                "variants": {"grid": {"a": [1]}},
                "executor": {"kind": "local", "table": "t"},
            }
        )


def test_the_documented_replay_experiment_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/experiment.md's example, as written, against the committed table."""
    text = (REPO / "docs" / "experiment.md").read_text()
    section = text.split("## Replaying a measured table", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    path = tmp_path / "replay.yaml"
    path.write_text(block.group(1))
    monkeypatch.chdir(REPO)  # the example names the table relative to the repository root, where the docs' commands run
    outcome = run_experiment(load_experiment(path), tmp_path / "out", emit=lambda _: None)
    assert outcome.ranking.winner is not None
