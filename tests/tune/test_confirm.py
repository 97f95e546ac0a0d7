"""The winner's curse: before recommending, `tune` re-measures its finalists with fresh repeats (the confirm
stage), the winner is chosen on the confirmed figures, the inflation (first measured vs confirmed) is in
results.json, summary.md, recommendation.txt and the terminal's summary, and the confirmation's launches are
counted like any other. On the simulator in process (fast), and once on real llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.sim_experiment import sim_experiment

from servetune.errors import ServetuneError
from servetune.report.files import write_outcome
from servetune.report.terminal import outcome_lines
from servetune.tune.execution.virtual import virtual_launcher
from servetune.tune.loop import run_experiment
from servetune.tune.results.confirm import CONFIRM_STAGE, Confirmation
from servetune.tune.results.stats import Estimate
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.loader import parse_experiment

REPO = Path(__file__).resolve().parents[2]


def _sim(**changes: Any) -> Experiment:
    data = yaml.safe_load(sim_experiment("confirm"))
    data.update(changes)
    return Experiment.model_validate(data)


def _run(exp: Experiment, out: Path, **kw: Any) -> Any:
    return run_experiment(exp, out, launcher=virtual_launcher(exp), emit=lambda _: None, **kw)


def test_the_finalists_are_re_measured_and_the_winner_is_chosen_on_the_confirmed_figures(tmp_path: Path) -> None:
    exp = _sim(confirm={"mode": "on", "finalists": 2, "repeats": 2})
    outcome = _run(exp, tmp_path / "on")
    confirmed = [r for r in outcome.records if r.variant.stage == CONFIRM_STAGE]
    assert len(confirmed) == 2 and all(r.status == "done" for r in confirmed)
    for record in confirmed:
        assert record.variant.repeats == 2 and len(record.runs) == 2 * 2, "2 probes × 2 fresh repeats"
        assert record.gpu_minutes > 0 and record.launch_s is not None, "the confirmation's launch is counted"
    winner = outcome.ranking.winner
    assert winner is not None and winner.record.variant.stage == CONFIRM_STAGE
    assert "finalists re-measured" in outcome.ranking.reason
    by_key = {r.key: r for r in outcome.records}
    assert all(by_key[r.variant.confirms or ""].variant.stage == "main" for r in confirmed)
    confirmations = outcome.ranking.confirmations
    assert len(confirmations) == 2 and all(c.inflation_pct is not None for c in confirmations)
    files = write_outcome(exp, outcome)
    results = json.loads(files["json"].read_text())
    assert [c["variant"] for c in results["confirmation"]] == [c.variant for c in confirmations]
    first = results["confirmation"][0]
    assert first["inflation_pct"] == pytest.approx(100 * (first["observed"] - first["confirmed"]) / first["confirmed"])
    assert first["repeats"] == 2
    rec = results["recommendation"]
    assert rec["variant"] == winner.record.variant.name and rec["confirmed"].startswith(confirmations[0].variant)
    objective = f"{exp.resolved_objective().probe}.{exp.resolved_objective().figure}"
    assert rec["figures"][objective].startswith(f"{winner.objective.mean:.4g}"[:3]), "the confirmed figure"  # type: ignore[union-attr]
    assert "## Confirmation (the winner's curse)" in files["markdown"].read_text()
    assert "# confirmed: " in files["recommendation"].read_text()
    assert any("Confirmed with fresh repeats" in line for line in outcome_lines(outcome.ranking, files, 100))
    runs = sum(len(r.runs) for r in outcome.records)
    again = _run(exp, tmp_path / "on", resume=True)
    assert sum(len(r.runs) for r in again.records) == runs, "a resume repeats no confirmation run"
    assert again.ranking.winner is not None and again.ranking.winner.record.key == winner.record.key


def test_auto_confirms_a_search_and_not_a_measured_grid(tmp_path: Path) -> None:
    grid = _run(_sim(), tmp_path / "grid")
    assert not any(r.variant.stage == CONFIRM_STAGE for r in grid.records), "every variant measured: no confirm"
    search = {"search": {"space": {"max-num-seqs": {"choice": [4, 8]}}, "budget_gpu_minutes": 600, "max_trials": 2}}
    searched = _run(_sim(variants=search), tmp_path / "search")
    confirmed = [r for r in searched.records if r.variant.stage == CONFIRM_STAGE]
    assert confirmed and searched.ranking.confirmations
    off = _run(_sim(variants=search, confirm={"mode": "off"}), tmp_path / "off")
    assert not off.ranking.confirmations


def test_a_finalist_that_misses_the_slos_on_confirmation_is_not_recommended(tmp_path: Path) -> None:
    outcome = _run(_sim(confirm={"mode": "on", "finalists": 1}), tmp_path / "a")
    first = outcome.ranking.winner
    assert first is not None
    # the same folder re-ranked under an SLO the confirmed runs miss: no winner, and the reason says why
    from servetune.tune.results.rank import rank

    tight = _sim(confirm={"mode": "on", "finalists": 1}, slos={"tpot_p99_ms": 0.001})
    ranking = rank(tight, outcome.records)
    assert ranking.winner is None and "finalists met every SLO when re-measured" in ranking.reason


def test_inflation_is_how_much_better_the_first_figure_looked() -> None:
    observed, confirmed = Estimate(110.0, 2.0, 3, 1.0), Estimate(100.0, 2.0, 3, 1.0)
    assert Confirmation("a", "a (confirm)", observed, confirmed, "max").inflation_pct == pytest.approx(10.0)
    low, high = Estimate(90.0, 2.0, 3, 1.0), Estimate(100.0, 2.0, 3, 1.0)
    assert Confirmation("b", "b (confirm)", low, high, "min").inflation_pct == pytest.approx(10.0), "a lower latency"


def test_no_stage_may_be_named_confirm() -> None:
    text = (
        sim_experiment("x")
        .replace("  matrix:", "  stages:\n  - name: confirm\n    matrix:")
        .replace("    baseline: base", "      baseline: base")
    )
    text = text.replace("    changes:\n      seqs-4:", "      changes:\n        seqs-4:")
    with pytest.raises(ServetuneError, match="`confirm` is the finalists'"):
        parse_experiment(text)


@pytest.mark.engine
def test_a_llamacpp_tune_confirms_its_winner_in_a_fresh_launch(tmp_path: Path, tiny_model: Any) -> None:
    exp = parse_experiment(
        """
name: confirm-llama
engine:
  engine: llamacpp
  model: tiny
  flags: {ctx-size: 2048, parallel: 2, threads: 1}
client: {endpoint: completions, tokenizer: tiny}
suite: {repeats: 2, warmup_requests: 1, probes: {decode_speed: {output_tokens: 24}}}
objective: decode_tok_s
confirm: {mode: on, finalists: 1, repeats: 2}
variants:
  matrix:
    baseline: two-slots
    changes: {one-slot: {parallel: 1}}
"""
    )
    outcome = run_experiment(exp, tmp_path / "llama", emit=lambda _: None)
    confirmed = [r for r in outcome.records if r.variant.stage == CONFIRM_STAGE]
    assert len(confirmed) == 1 and confirmed[0].status == "done" and len(confirmed[0].runs) == 2
    assert outcome.launches == 3, "two variants, then the winner launched again for its fresh repeats"
    winner = outcome.ranking.winner
    assert winner is not None and winner.record.key == confirmed[0].key
    (confirmation,) = outcome.ranking.confirmations
    assert confirmation.confirmed is not None and confirmation.inflation_pct is not None
    assert confirmed[0].runs[0].result.figures["decode_tok_s"] != pytest.approx(
        next(r for r in outcome.records if r.key == confirmed[0].variant.confirms)
        .runs[0]
        .result.figures["decode_tok_s"],
        rel=1e-9,
    ), "fresh measurements, not copies"
