"""On real CPU engines with the tiny model: every launch of a tune proves each requested flag was applied (F25) —
llama.cpp pads a context to a multiple of 256 tokens, and the variant asking for 1000 fails as `flag_not_applied`
naming the flag before anything is measured; vLLM's log shows the flags it was given — and the correctness gate (F24) compares a
variant's greedy answers with the baseline's, the tolerance set by the baseline against itself: llama.cpp's
q4_0 K and V caches change the tiny random model's answers (measured: 4% of the greedy tokens agree; a q4_0 K cache
alone kept 95%, a q8_0 one 100%) and fail the gate, f16 (the default) passes. With random
weights this proves the gate's mechanics only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servetune.tune.loop import run_experiment
from servetune.tune.schema.loader import parse_experiment

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tiny_model: Any) -> None:
    monkeypatch.setenv("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))


def _records(outcome: Any) -> dict[str, Any]:
    return {r.variant.name: r for r in outcome.records}


def test_llamacpp_flags_are_proven_applied_and_a_padded_context_fails_named(tmp_path: Path) -> None:
    exp = parse_experiment(
        """
name: applied-llama
engine: {engine: llamacpp, model: tiny, flags: {ctx-size: 512, parallel: 1, threads: 1}}
client: {endpoint: completions, tokenizer: tiny}
suite: {repeats: 1, warmup_requests: 0, probes: {short_latency: {max_tokens: 4}}}
objective: {probe: short_latency, figure: e2el_ms}
variants:
  matrix:
    baseline: base
    changes: {padded: {ctx-size: 1000}}
"""
    )
    records = _records(run_experiment(exp, tmp_path / "a", emit=lambda _: None))
    base = records["base"]
    assert base.status == "done", base.failure
    applied = base.facts["flags_applied"]
    assert applied["ctx-size"] == "applied: llama.cpp's context: n_ctx = 512", applied
    assert applied["parallel"] == "applied: initializing, n_slots = 1"
    padded = records["padded"]
    assert padded.status == "failed" and padded.failure is not None
    assert padded.failure.klass == "flag_not_applied"
    assert "--ctx-size 1000 was not applied: the engine runs with 1024" in padded.failure.excerpt
    assert not padded.runs, "nothing is measured under a flag the engine did not apply"


def test_vllm_cpu_shows_the_flags_it_was_given(tmp_path: Path) -> None:
    exp = parse_experiment(
        """
name: applied-vllm
engine:
  engine: vllm
  model: tiny
  flags: {max-model-len: 1024, max-num-seqs: 4, enforce-eager: true, enable-prefix-caching: false}
  env: {VLLM_CPU_KVCACHE_SPACE: "1"}
client: {endpoint: completions, tokenizer: tiny}
suite: {repeats: 2, warmup_requests: 0, probes: {correctness: {max_tokens: 8, prompts: [hello, "1 2 3"]}}}
objective: {probe: correctness, figure: generated_tokens}
variants:
  matrix:
    baseline: base
    changes: {fp32: {dtype: float32}}
"""
    )
    records = _records(run_experiment(exp, tmp_path / "v", emit=lambda _: None))
    base = records["base"]
    assert base.status == "done", base.failure
    applied = base.facts["flags_applied"]
    assert applied["max-model-len"] == "applied: engine config: max_seq_len=1024", applied
    assert applied["enable-prefix-caching"] == "applied: engine config: enable_prefix_caching=False"
    assert applied["max-num-seqs"] == "applied: non-default args: max_num_seqs=4"
    assert all(run.result.ok for run in base.runs), [run.result.error for run in base.runs]
    samples = base.runs[0].result.samples
    assert len(samples) == 2 and all(s.tokens and s.logprobs[0] is not None for s in samples), samples
    assert records["fp32"].facts["flags_applied"]["dtype"].startswith("applied:")


def test_a_kv_cache_type_that_changes_the_answers_fails_the_correctness_gate(tmp_path: Path) -> None:
    exp = parse_experiment(
        """
name: correct-llama
engine: {engine: llamacpp, model: tiny, flags: {ctx-size: 1024, parallel: 1, threads: 1}}
client: {endpoint: completions, tokenizer: tiny}
suite:
  repeats: 2
  warmup_requests: 0
  probes:
    correctness: {max_tokens: 64}
    short_latency: {max_tokens: 4}
objective: {probe: short_latency, figure: e2el_ms}
variants:
  matrix:
    baseline: base
    changes:
      kv-q4: {cache-type-k: q4_0, cache-type-v: q4_0, flash-attn: "on"}
      k-f16: {cache-type-k: f16}
      two-slots: {parallel: 2, ctx-size: 2048}
"""
    )
    outcome = run_experiment(exp, tmp_path / "c", emit=lambda _: None)
    entries = {e.record.variant.name: e for e in outcome.ranking.entries}
    q4 = entries["kv-q4"]
    assert q4.correctness is not None and not q4.correctness.passed, q4.correctness
    assert q4.correctness.baseline_self.pct == 100.0, "llama.cpp answers the same greedily twice"
    assert not q4.eligible and any(f.startswith("correctness: greedy answers agree") for f in q4.failures)
    f16 = entries["k-f16"]
    assert f16.correctness is not None and f16.correctness.passed and f16.correctness.variant.pct == 100.0
    assert f16.eligible
    slots = entries["two-slots"]
    assert slots.correctness is None and not any(r.probe == "correctness" for r in slots.record.runs), (
        "a knob that does not change outputs is not gated"
    )
