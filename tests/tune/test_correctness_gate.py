"""The correctness gate's rule, on records filled by hand: agreement is the share of greedy tokens two answers
share before they differ; a variant passes when it agrees with the baseline at least as well as the baseline
agrees with itself, less `max_loss_pct`; a failed gate keeps the variant out of the ranking with the figures."""

from __future__ import annotations

from typing import Any

import pytest

from servetune.engines.config import EngineConfig
from servetune.load.backend import ClientSpec, GreedyText
from servetune.suite.result import ProbeResult
from servetune.tune.results.correctness import agreement
from servetune.tune.results.rank import rank
from servetune.tune.results.result import RunResult, VariantRecord
from servetune.tune.schema.loader import parse_experiment
from servetune.tune.schema.variants import matrix_variants

EXPERIMENT = """
name: gate
engine: {engine: llamacpp, model: m.gguf, flags: {ctx-size: 1024}}
suite: {repeats: 2, probes: {correctness: {max_loss_pct: %s}, short_latency: {}}}
objective: {probe: short_latency, figure: e2el_ms}
variants:
  matrix:
    baseline: base
    changes: {q4: {cache-type-k: q4_0}, q8: {cache-type-k: q8_0}}
"""


def _answer(prompt: str, tokens: str, logprob: float = -1.0) -> GreedyText:
    return GreedyText(prompt=prompt, tokens=list(tokens), logprobs=[logprob] * len(tokens))


def _records(answers: dict[str, list[str]], loss: float = 0.0) -> tuple[Any, list[VariantRecord]]:
    exp = parse_experiment(EXPERIMENT % loss)
    base = EngineConfig(engine="llamacpp", model="m.gguf", flags={"ctx-size": 1024})
    out = []
    for position, variant in enumerate(matrix_variants(base, ClientSpec(), exp.variants.matrix)):
        runs = []
        for repeat, text in enumerate(answers[variant.name]):
            samples = [_answer("p1", text), _answer("p2", "abcd")]
            runs.append(
                RunResult(
                    variant_key=variant.key(),
                    probe="correctness",
                    repeat=repeat,
                    result=ProbeResult(probe="correctness", samples=samples, figures={"generated_tokens": 8.0}),
                    wall_s=1.0,
                )
            )
            runs.append(
                RunResult(
                    variant_key=variant.key(),
                    probe="short_latency",
                    repeat=repeat,
                    result=ProbeResult(probe="short_latency", figures={"e2el_ms": 100.0 + position, "ttft_ms": 9.0}),
                    wall_s=1.0,
                )
            )
        out.append(VariantRecord(variant=variant, position=position, status="done", runs=runs))
    return exp, out


def test_agreement_counts_the_tokens_shared_before_the_first_difference() -> None:
    a = [_answer("p", "abcdef", -1.0)]
    assert agreement(a, [_answer("p", "abcdef", -1.25)]).pct == 100.0
    assert agreement(a, [_answer("p", "abcdef", -1.25)]).drift == pytest.approx(0.25)
    assert agreement(a, [_answer("p", "abXdef")]).pct == pytest.approx(100 * 2 / 6)
    assert agreement(a, [_answer("p", "abc")]).pct == pytest.approx(50.0), "over the longer answer"


def test_a_variant_whose_answers_differ_from_the_baseline_fails_the_gate() -> None:
    exp, records = _records({"base": ["abcd", "abcd"], "q4": ["abXd", "abXd"], "q8": ["abcd", "abcd"]})
    ranking = rank(exp, records)
    entries = {e.record.variant.name: e for e in ranking.entries}
    q4 = entries["q4"]
    assert not q4.eligible and q4.correctness is not None and q4.correctness.variant.pct == pytest.approx(75.0)
    assert any("agree 75% with the baseline's" in f and "agrees 100% with itself" in f for f in q4.failures)
    assert entries["q8"].eligible and entries["q8"].correctness is not None
    assert entries["base"].correctness is None, "the baseline is the reference"


def test_the_tolerance_is_the_baseline_against_itself_and_max_loss() -> None:
    noisy = {"base": ["abcd", "abXd"], "q4": ["abXd", "abXd"], "q8": ["abcd", "abcd"]}
    exp, records = _records(noisy)
    q4 = next(e for e in rank(exp, records).entries if e.record.variant.name == "q4")
    assert q4.correctness is not None and q4.correctness.baseline_self.pct == pytest.approx(75.0)
    assert q4.correctness.passed, "as close to the baseline as the baseline is to itself"
    exp, records = _records({"base": ["abcd", "abcd"], "q4": ["abXd", "abXd"], "q8": ["abcd", "abcd"]}, loss=30)
    assert next(e for e in rank(exp, records).entries if e.record.variant.name == "q4").eligible
