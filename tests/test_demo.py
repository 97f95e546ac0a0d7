"""`servetune demo` without its minutes on real engines: the simulated part runs seed 001's round 2 in process in
seconds and says its figures are simulated and how they were calibrated; a second run resumes, `--fresh` or a
folder holding something else starts beside it; the one-screen summary fits 40 lines at 100 columns and names the
decision with the ranking's own rule. (The real part runs in `tests/tune/test_tune_engines.py`; its stability is
measured in benchmarks/demo_stability.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servetune.demo import DemoRun, Part, choose_folder, demo_experiment, simulate, simulated_lines, summary_lines
from servetune.report.files import write_outcome
from servetune.suite.result import ProbeResult
from servetune.tune.loop import Outcome
from servetune.tune.results.rank import rank
from servetune.tune.results.result import RunResult, VariantRecord
from servetune.tune.schema.variants import base_config
from servetune.tune.search.sources import source_for


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Part:
    return simulate(tmp_path_factory.mktemp("demo") / "seed-001-sim")


def test_the_simulated_part_runs_the_whole_matrix_in_process(simulated: Part) -> None:
    records = simulated.outcome.records
    assert len(records) == 14 and all(r.status == "done" for r in records), [
        (r.variant.name, r.status) for r in records
    ]
    assert simulated.outcome.launches == 14 and all(r.facts["engine"] == "sim" for r in records)
    assert all(run.time_scale == 1.0 for r in records for run in r.runs), "virtual time: no wall-clock scaling"
    winner = simulated.outcome.ranking.winner
    assert winner is not None and winner.record.variant.name != "R2-A0", simulated.outcome.ranking.reason
    text = " ".join(" ".join(simulated_lines(simulated, 100)).split())
    assert "SIMULATED, not measured" in text and "uncalibrated" in text and "2×A100-80G-SXM" in text
    assert "Simulated: " + winner.record.variant.name in text and "outside the noise" in text
    assert str(simulated.files["html"]) in text and simulated.files["html"].exists()


def test_the_simulated_reports_print_intervals_for_people(simulated: Part) -> None:
    """Seed 001's deterministic repeats differ by float dust: it reads "± 0" and "0", never "± 0.0000000014",
    "-0.000000100" or "~-0.0%", in every report a person reads (summary.csv keeps the numbers)."""
    files = simulated.files
    texts = {kind: files[kind].read_text() for kind in ("markdown", "html", "recommendation")}
    texts["screen"] = "\n".join(simulated_lines(simulated, 100))
    for kind, text in texts.items():
        assert not re.search(r"\d\.0000|-0\.0%|-0 ", text), (kind, re.findall(r".{30}\d\.0000.{10}|.{30}-0\.0%", text))
    row = next(line for line in texts["markdown"].splitlines() if line.startswith("| 3 | R2-A5-no-prefix"))
    assert "| 0 ± 0 (-100%) |" in row and "570 ± 170 (~0.0%)" in row, row


def test_a_second_run_resumes_and_fresh_or_another_experiment_starts_beside(simulated: Part) -> None:
    folder = simulated.outcome.out_dir
    again, resume, said = choose_folder(folder, simulated.experiment)
    assert (again, resume) == (folder, True) and "resuming" in said and "14 variant(s)" in said
    fresh, resume, said = choose_folder(folder, simulated.experiment, fresh=True)
    assert fresh != folder and fresh.name.startswith(folder.name + "-") and not resume and "--fresh" in said
    other, resume, said = choose_folder(folder, demo_experiment())
    assert other != folder and not resume and "holds another experiment" in said
    resumed = simulate(folder)
    assert resumed.outcome.out_dir == folder and resumed.outcome.launches == 0, "nothing finished is repeated"


LEVELS = {"llama-2-slots": 2, "llama-4-slots": 4, "llama-8-slots": 8}


def demo_records() -> list[VariantRecord]:
    """The demo's variants with load curves shaped like a real run's (five repeats each): llama-1-slot meets the
    TTFT SLO at 2 users in its first repeat only, llama-8-slots-no-cont-batching at 8 or 4 users by turns."""
    exp = demo_experiment()
    stage = exp.variants.as_stages()[0]
    variants = source_for(stage, base_config(exp), exp.client, "max", None).ask()
    out = []
    for position, variant in enumerate(variants):
        slots = int(variant.config.flags["parallel"])  # type: ignore[arg-type]
        runs = []
        for repeat in range(5):
            capacity = LEVELS.get(variant.name, 8 if repeat % 2 else 4)
            if variant.name == "llama-1-slot":
                capacity = 0 if repeat else 2
            points = [
                {
                    "concurrency": c,
                    "output_tok_s": 1500.0,
                    "ttft_p99_ms": 30.0 if c <= max(slots, 1) else 300.0 * c,
                    "tpot_p50_ms": 0.55 * min(c, slots) + 0.01 * repeat,
                }
                for c in (2, 4, 8)
            ]
            figures = {"slo_max_concurrency": float(capacity), "goodput_rps": 6.0 if capacity else 0.0}
            result = ProbeResult(probe="load_curve", figures=figures, points=points, requests=40)
            runs.append(
                RunResult(variant_key=variant.key(), probe="load_curve", repeat=repeat, result=result, wall_s=6)
            )
        out.append(VariantRecord(variant=variant, position=position, status="done", runs=runs, launch_s=0.1))
    return out


def test_the_summary_fits_one_screen_and_names_the_decision(simulated: Part, tmp_path: Path) -> None:
    exp = demo_experiment()
    records = demo_records()
    outcome = Outcome(tmp_path, records, rank(exp, records), launches=5)
    tuned = Part(exp, outcome, write_outcome(exp, outcome), wall_s=190.0)
    run = DemoRun(tmp_path, f"starting fresh in {tmp_path}", simulated, tuned)
    for width in (100, 120):
        lines = summary_lines(run, width)
        assert len(lines) <= 40 and all(len(line) <= width for line in lines), (width, len(lines), lines)
    text = " ".join(" ".join(summary_lines(run, 100)).split())  # wrapped lines read as one text
    assert "Decision: llama-8-slots (parallel=8)" in text and "Against the baseline llama-2-slots (2.00" in text
    assert "+300% ± " in text and "outside the noise" in text, text
    tie = "a tie with llama-8-slots-no-cont-batching (5.6 ± 2.7): +43% ± 49% (95% interval), inside the noise"
    assert tie in text, text
    assert "the edge of the range tried: parallel=8 is the largest value tried (1, 2, 4, 8)" in text, text
    one_slot = next(e for e in outcome.ranking.entries if e.record.variant.name == "llama-1-slot")
    assert one_slot.failures == ["no load_curve level met the latency SLOs in 4 of 5 repeats"], one_slot.failures
    assert "llama-1-slot" in text and "misses SLOs" in text
    assert "Trade-offs" in text and "TPOT" in text and "llama-server" in text and "--parallel 8" in text
    assert "SIMULATED, not measured" in text and "starting fresh in" in text and "`--fresh`" in text
