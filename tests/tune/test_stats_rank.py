"""Confidence intervals, ties, SLO filtering and the recommendation, on synthetic records."""

from __future__ import annotations

import math

from tune_synthetic import experiment, records

from servetune.metrics.slo import missed_repeats, slo_miss
from servetune.suite.result import ProbeResult
from servetune.tune.results.rank import rank
from servetune.tune.results.recommend import recommend
from servetune.tune.results.result import RunResult, VariantRecord
from servetune.tune.results.stats import Estimate, delta, estimate, t975


def test_estimate_matches_a_t_interval() -> None:
    est = estimate([10.0, 12.0, 14.0])
    assert est is not None and est.mean == 12.0 and est.n == 3
    assert math.isclose(est.half_width, t975(2) * 2.0 / math.sqrt(3))
    one = estimate([5.0])
    assert one is not None and math.isinf(one.half_width)
    assert estimate([]) is None


def test_delta_inside_noise_is_not_significant() -> None:
    base = estimate([100.0, 101.0, 99.0])
    same = estimate([100.5, 99.5, 100.0])
    better = estimate([120.0, 121.0, 119.0])
    assert base and same and better
    assert not delta(same, base).significant
    d = delta(better, base)
    assert d.significant and math.isclose(d.pct, 20.0)


def test_ranking_drops_slo_misses_and_failures() -> None:
    exp = experiment()
    ranking = rank(exp, records())
    names = [e.record.variant.name for e in ranking.entries if e.rank]
    assert names[0] == "A1-bf16-kv" and ranking.winner.record.variant.name == "A1-bf16-kv"
    util = next(e for e in ranking.entries if e.record.variant.name == "B2-util-0.94")
    assert util.rank is None and any("memory headroom" in f for f in util.failures)
    crash = next(e for e in ranking.entries if e.record.variant.name == "C9-crash")
    assert crash.rank is None and crash.record.failure.klass == "oom_at_startup"


def test_tie_prefers_the_simpler_config() -> None:
    exp = experiment()
    recs = [r for r in records() if r.variant.name in {"A0", "D1-same"}]
    ranking = rank(exp, recs)
    tied = [e for e in ranking.entries if e.tie_with_winner]
    assert len(tied) == 2, "71.0 vs 71.4 tok/s with 1% noise is a tie"
    assert ranking.winner.record.variant.name == "A0", "the baseline has no change: simplest"
    assert "tie" in ranking.reason or "overlaps" in ranking.reason


def test_one_repeat_cannot_separate_variants() -> None:
    ranking = rank(experiment(), records(repeats=1))
    assert ranking.winner.record.variant.name == "A0"


def test_recommendation_commands() -> None:
    exp = experiment()
    rec = recommend(exp, rank(exp, records()))
    assert rec is not None and rec.variant == "A1-bf16-kv"
    assert rec.serve_command.startswith("vllm serve /models/Qwen3.6-27B")
    assert "--kv-cache-dtype auto" in rec.serve_command
    assert rec.docker_command and "--gpus 2" in rec.docker_command and "vllm/vllm-openai" in rec.docker_command
    assert rec.sampling_presets["thinking-general"]["temperature"] == 1.0


def test_a_sim_winner_prints_the_real_vllm_command() -> None:
    """A variant tuned on `sim-serve` is deployed on vLLM: the simulator's own flags must not leak."""
    from servetune.engines.commands import serve_command
    from servetune.sim.flags import SIM_ONLY_FLAGS

    exp = experiment()
    recs = [r for r in records() if r.status == "done"]
    sim_flags = {
        "gpu": "A100-80G-SXM",
        "time-scale": 20,
        "calibration": "p.json",
        "acceptance-rate": 0.75,
        "vllm-version": "0.19.1",
        "seed": 3,
    }
    for record in recs:
        config = record.variant.config
        record.variant = record.variant.model_copy(
            update={"config": config.model_copy(update={"engine": "sim", "flags": {**config.flags, **sim_flags}})}
        )
    rec = recommend(exp, rank(exp, recs))
    assert rec is not None and rec.serve_command.startswith("vllm serve /models/Qwen3.6-27B")
    assert rec.docker_command and "vllm/vllm-openai" in rec.docker_command
    for flag in SIM_ONLY_FLAGS:
        assert f"--{flag} " not in rec.serve_command + "\n" and f"--{flag} " not in rec.docker_command + "\n"
    assert "--kv-cache-dtype auto" in rec.serve_command and "--tensor-parallel-size 2" in rec.serve_command
    assert "vllm/vllm-openai:v0.19.1" in rec.docker_command, "the vLLM release the simulator imitated"
    assert any("simulated config" in note for note in rec.notes)
    sim = recs[0].variant.config
    assert (
        serve_command(sim).text
        == serve_command(
            sim.model_copy(
                update={"engine": "vllm", "flags": {k: v for k, v in sim.flags.items() if k not in SIM_ONLY_FLAGS}}
            )
        ).text
    )


def with_figure(items: list[VariantRecord], name: str, probe: str, figure: str, values: dict[int, float]) -> list:
    """The records with `name`'s `probe.figure` set to `values[repeat]` in the repeats given."""
    out = []
    for record in items:
        if record.variant.name != name:
            out.append(record)
            continue
        runs = []
        for run in record.runs:
            if run.probe == probe and run.repeat in values:
                figures = {**run.result.figures, figure: values[run.repeat]}
                run = run.model_copy(update={"result": run.result.model_copy(update={"figures": figures})})
            runs.append(run)
        out.append(record.model_copy(update={"runs": runs}))
    return out


def test_an_slo_is_met_only_when_every_repeat_meets_it() -> None:
    """A latency SLO the load curve met in 1 repeat of 5, and a memory headroom below its lower bound in 1 repeat
    of 5 (a mean of 7.0% ≥ 5%), are both misses: the rule is every repeat (slo.missed_repeats)."""
    exp = experiment()
    lucky = with_figure(records(repeats=5), "A1-bf16-kv", "load_curve", "goodput_rps", dict.fromkeys(range(1, 5), 0.0))
    entry = next(e for e in rank(exp, lucky).entries if e.record.variant.name == "A1-bf16-kv")
    assert entry.rank is None and entry.failures == ["no load_curve level met the latency SLOs in 4 of 5 repeats"]
    low = with_figure(records(repeats=5), "A1-bf16-kv", "memory_headroom", "headroom_pct", {2: 3.9})
    entry = next(e for e in rank(exp, low).entries if e.record.variant.name == "A1-bf16-kv")
    assert entry.rank is None and len(entry.failures) == 1, entry.failures
    assert "memory headroom 3.9" in entry.failures[0] and entry.failures[0].endswith("in 1 of 5 repeats")
    every = next(e for e in rank(exp, records(repeats=5)).entries if e.record.variant.name == "B2-util-0.94")
    assert every.failures[0].endswith("in 5 of 5 repeats"), every.failures


def test_one_comparison_judges_a_run_and_a_repeat() -> None:
    assert slo_miss("ttft_p99_ms", 120.0, 100) == "ttft_p99_ms 120.0 > 100"
    assert slo_miss("ttft_p99_ms", 100.0, 100) is None
    assert slo_miss("error_rate", 0.25, 0) == "error rate 0.250 > 0"
    assert slo_miss("memory_headroom_pct", 6.0, 5) is None
    assert (
        slo_miss("memory_headroom_pct", 4.0, 5, "memory headroom", "%")
        == "memory headroom 4.0% < 5% (memory_headroom_pct)"
    )
    assert missed_repeats([True] * 5) is None and missed_repeats([True, False]) == "in 1 of 2 repeats"
    assert missed_repeats([]) is not None, "nothing measured is not a pass"


def test_a_latency_slo_without_a_load_curve_is_judged_on_each_repeats_figure() -> None:
    """No load curve ran: the E2EL SLO is judged on the figure short_latency declares for it, in every repeat (one
    repeat at 900 ms of five misses 700 ms although the mean, 644 ms, is within it)."""
    exp = experiment().model_copy(update={"slos": {"e2el_p99_ms": 700.0}})
    items = [r.model_copy(update={"runs": [x for x in r.runs if x.probe != "load_curve"]}) for r in records(5)]
    ranking = rank(exp, with_figure(items, "A0", "short_latency", "e2el_ms", {3: 900.0}))
    entry = next(e for e in ranking.entries if e.record.variant.name == "A0")
    assert entry.failures == ["short chat E2EL 900.0ms > 700ms (e2el_p99_ms) in 1 of 5 repeats"], entry.failures


SEED = {"r0": 0.78, "r1": 0.99, "r2": 1.23}
"""One repeat's arrival draw moves every variant's goodput alike (the H200 table's (b): ±22% per repeat)."""


def _drawn(mean: float, noise: dict[str, float] | None = None) -> Estimate:
    """Three repeats on the draws r0..r2: the draw's factor times the variant's own noise."""
    draws = list(SEED)
    est = estimate([mean * SEED[d] * (1 + (noise or {}).get(d, 0.0)) for d in draws], draws)
    assert est is not None
    return est


def test_repeats_on_the_same_draws_are_compared_repeat_by_repeat() -> None:
    """8% better in every repeat, under a draw that moves both by ±22%: Welch's interval of two independent
    samples calls it a tie (the draw's spread is in both variances), the paired interval of the per-repeat
    differences finds it."""
    base = _drawn(7.0, {"r0": 0.01, "r1": -0.01, "r2": 0.0})
    better = _drawn(7.0 * 1.08, {"r0": -0.01, "r1": 0.01, "r2": 0.005})
    unpaired = delta(estimate([v for _, v in better.draws]), estimate([v for _, v in base.draws]), 2.0)
    assert unpaired is not None and not unpaired.significant and not unpaired.paired, unpaired
    paired = delta(better, base, 2.0)
    assert paired is not None and paired.paired and paired.significant, paired
    assert math.isclose(paired.pct, unpaired.pct), "the change is the same; only its interval narrows"
    assert paired.half_width_pct < unpaired.half_width_pct / 5


def test_a_real_tie_stays_a_tie_when_paired() -> None:
    """No effect, each variant's own noise ±1.5%: the paired interval holds 0; and 1% in every repeat is below
    the practical threshold (2%) however narrow its interval (none: the draw's ±22% cancels in the ratios)."""
    base = _drawn(7.0, {"r0": 0.015, "r1": -0.015, "r2": 0.0})
    same = _drawn(7.0, {"r0": -0.01, "r1": 0.012, "r2": 0.004})
    d = delta(same, base, 2.0)
    assert d is not None and d.paired and not d.significant, d
    small = _drawn(7.0 * 1.01)
    d = delta(small, _drawn(7.0), 2.0)
    assert d is not None and d.paired and d.half_width_pct < 1e-9 and not d.significant, d


def test_repeats_that_do_not_share_their_draws_keep_welchs_interval() -> None:
    """Other draws, another repeat count, or runs stored without their draws (a folder from before them) are
    compared as two independent samples."""
    base = _drawn(7.0)
    values = [v for _, v in _drawn(7.0 * 1.08).draws]
    welch = delta(estimate(values), estimate([v for _, v in base.draws]))
    assert welch is not None
    for other in (
        estimate(values, ["r0", "r1", "r3"]),  # another draw
        estimate(values),  # no draws known
        estimate(values, ["r0", "r1", None]),  # one repeat's unknown
    ):
        assert other is not None
        d = delta(other, base)
        assert d is not None and not d.paired and d == welch, d
    fewer = estimate(values[:2], ["r0", "r1"])
    assert fewer is not None and not delta(fewer, base).paired  # type: ignore[union-attr]


def _goodput_records(draws: bool) -> list[VariantRecord]:
    """Two variants' fixed-load goodput over three repeats on shared draws, one 8% better in each repeat."""
    recs = [r for r in records() if r.variant.name in {"A0", "D1-same"}]
    out = []
    for record in recs:
        gain = 1.08 if record.variant.name == "D1-same" else 1.0
        runs = [
            RunResult(
                variant_key=record.key,
                probe="decode_speed",
                repeat=k,
                wall_s=7.0,
                result=ProbeResult(
                    probe="decode_speed",
                    figures={"output_tok_s": 71.0 * SEED[d] * gain},
                    draw=d if draws else None,
                ),
            )
            for k, d in enumerate(SEED)
        ]
        out.append(record.model_copy(update={"runs": runs}))
    return out


def test_the_ranking_separates_paired_repeats_that_a_folder_without_draws_ties() -> None:
    """The ranking's ties are the paired rule's when the stored runs name their draws (a tune of this version),
    today's when they do not (a folder from before): the same figures, two verdicts."""
    exp = experiment().model_copy(update={"slos": {}})
    paired = rank(exp, _goodput_records(draws=True))
    assert paired.winner is not None and paired.winner.record.variant.name == "D1-same"
    assert [e.record.variant.name for e in paired.entries if e.tie_with_winner] == ["D1-same"]
    d = paired.winner.deltas[("decode_speed", "output_tok_s")]
    assert d.paired and d.significant and math.isclose(d.pct, 8.0)
    old = rank(exp, _goodput_records(draws=False))
    assert old.winner is not None and old.winner.record.variant.name == "A0", "a tie goes to the simplest"
    assert not old.entries[0].deltas[("decode_speed", "output_tok_s")].paired


def test_a_reference_repeat_of_zero_pairs_by_differences() -> None:
    """Goodput 0 in one repeat (no request met the bounds) has no ratio: the repeats still pair, by their
    differences in units of the reference's mean."""
    draws = ["r0", "r1", "r2"]
    base, other = estimate([0.0, 6.0, 9.0], draws), estimate([1.0, 7.0, 10.0], draws)
    assert base is not None and other is not None
    d = delta(other, base)
    assert d is not None and d.paired and d.half_width_pct < 1e-9 and d.significant and math.isclose(d.pct, 20.0)
