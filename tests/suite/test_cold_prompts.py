"""Prompts that must be cold are cold, proven by the engine's own counters, and a warm prefill is caught.

The suite runs every probe of a variant's repeat with one seed; the acceptance probe's long document and
long_prefill's drew their words from it alike, so long_prefill's prompt began with the acceptance prompt,
already in the engine's cache: llama.cpp evaluated 88 of its 600 prompt tokens here (512 of 1,551 in the
demo), vLLM CPU 88 of 600 (four 128-token blocks hit), the simulator 8,337 of 24,017, and prefill tok/s timed
a cache hit. Each test runs the suite's order — acceptance, then long_prefill, with the seeds the tuner gives a
(variant, repeat) (`ProbeContext.of_run`) — over 2 variants × 2 repeats and reads the engine's counters around
long_prefill itself. The tuner's repeat r draws the same lengths and arrivals on every variant (common random
numbers): those runs, on one engine, must still find nothing of each other's prompts in its cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.launch import launch
from servetune.load.backend import Backend, ClientSpec, LiveBackend
from servetune.load.prompts import RequestFactory
from servetune.load.tokens import LocalTokenizer
from servetune.load.workload import Workload
from servetune.metrics.prometheus import MetricsSnapshot
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import deployment_for_config
from servetune.suite.registry import get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext

ACCEPT_TOKENS = 512
"""The acceptance probe's long document: four vLLM CPU cache blocks (128 tokens each)."""
PREFILL_TOKENS = 600


def _live(engine: Any, tiny_model: Any) -> LiveBackend:
    return LiveBackend(
        engine.base_url,
        engine.model_name,
        client=ClientSpec(endpoint="completions", tokenizer=str(tiny_model.tokenizer_json)),
        engine=engine.cfg.engine,
        max_model_len=engine.facts.max_model_len,
    )


def _sim() -> SimBackend:
    config = EngineConfig(engine="sim", model="qwen3.6-27b", flags={"gpu": "H200", "max-model-len": 8192})
    return SimBackend(deployment_for_config(config))


def _ctx(backend: Backend, variant: str, repeat: int) -> ProbeContext:
    """The seeds the tuner's session gives a repeat of a variant (the one rule: `ProbeContext.of_run`)."""
    return ProbeContext.of_run(backend, run=variant, repeat=repeat)


def _probe(ctx: ProbeContext, name: str, **settings: Any) -> ProbeResult:
    spec = get_probe(name)
    return asyncio.run(run_probe(spec, ctx, spec.params.model_validate(settings)))


def _evaluated(before: MetricsSnapshot, after: MetricsSnapshot) -> float:
    """Prompt tokens the engine computed between two scrapes, read from its raw counters: llama.cpp counts the
    evaluated ones, vLLM (and the simulator) every prompt token and the cached ones apart."""

    def grew(name: str) -> float:
        return sum(after.values(name)) - sum(before.values(name))

    if "llamacpp:prompt_tokens_total" in after.names():
        return grew("llamacpp:prompt_tokens_total")
    return grew("vllm:prompt_tokens_total") - grew("vllm:prefix_cache_hits_total")


def _scrape(backend: Backend) -> MetricsSnapshot:
    snap = asyncio.run(backend.scrape())
    assert snap is not None, "the engine's counters are needed"
    return snap


def _suite_order(backend: Backend, accept_tokens: int, prefill_tokens: int) -> None:
    """long_prefill after the acceptance probe, 2 variants × 2 repeats: every prompt token evaluated, by the
    engine's counters, and servetune's reconciliation read the same."""
    rows, results = [], []
    for variant in ("baseline", "two-slots"):
        for repeat in range(2):
            ctx = _ctx(backend, variant, repeat)
            accept = _probe(ctx, "acceptance", long_context_tokens=accept_tokens)
            assert accept.figures["passed"] == 1.0, accept.notes
            before = _scrape(backend)
            prefill = _probe(ctx, "long_prefill", prompt_tokens=prefill_tokens, max_tokens=4)
            after = _scrape(backend)
            requested = prefill.figures.get("prompt_tokens")
            assert requested is not None, prefill.error
            rows.append((f"{variant}/{repeat}", requested, _evaluated(before, after)))
            results.append(prefill)
            print(f"{variant}/{repeat}: requested {requested:.0f}, evaluated {rows[-1][2]:.0f}")
    assert [(run, evaluated) for run, _, evaluated in rows] == [(run, requested) for run, requested, _ in rows]
    for (_, _, evaluated), prefill in zip(rows, results, strict=True):
        assert prefill.ok and prefill.reconciliation is not None, prefill.warnings
        assert not prefill.reconciliation.flagged, prefill.reconciliation
        assert prefill.reconciliation.evaluated_tokens == evaluated, "servetune reads the same counters"


def test_long_prefill_evaluates_every_prompt_token_on_llama_cpp(llama_server: Any, tiny_model: Any) -> None:
    _suite_order(_live(llama_server, tiny_model), ACCEPT_TOKENS, PREFILL_TOKENS)


def test_long_prefill_evaluates_every_prompt_token_on_vllm(vllm_server: Any, tiny_model: Any) -> None:
    _suite_order(_live(vllm_server, tiny_model), ACCEPT_TOKENS, PREFILL_TOKENS)


def test_long_prefill_evaluates_every_prompt_token_on_the_simulator() -> None:
    _suite_order(_sim(), 4096, 6000)


def _warm_prefill_is_flagged(backend: Backend, tokens: int) -> None:
    """The same probe twice with one seed: the second run's prompt is the first's, served from the cache."""
    ctx = _ctx(backend, "again", 0)
    cold = _probe(ctx, "long_prefill", prompt_tokens=tokens, max_tokens=4)
    assert cold.ok and cold.reconciliation is not None and not cold.reconciliation.flagged, cold.warnings
    warm = _probe(ctx, "long_prefill", prompt_tokens=tokens, max_tokens=4)
    assert warm.reconciliation is not None
    flagged = warm.reconciliation.flagged
    print(warm.warnings)
    assert [c.name for c in flagged] == ["cached_tokens"], warm.reconciliation
    assert flagged[0].engine >= tokens / 2 and flagged[0].servetune == 32, "both numbers: cached, and allowed"
    assert not warm.ok, "a warm prefill is not valid for comparisons"
    assert any("warm prefill" in w and f"{flagged[0].engine:,.0f}" in w for w in warm.warnings), warm.warnings
    assert warm.figures["prefill_tok_s"], "the figures stay, for the record"


def test_a_warm_prefill_is_flagged_on_llama_cpp(llama_server: Any, tiny_model: Any) -> None:
    _warm_prefill_is_flagged(_live(llama_server, tiny_model), PREFILL_TOKENS)


def test_a_warm_prefill_is_flagged_on_vllm(vllm_server: Any, tiny_model: Any) -> None:
    _warm_prefill_is_flagged(_live(vllm_server, tiny_model), PREFILL_TOKENS)


def test_a_warm_prefill_is_flagged_on_the_simulator() -> None:
    _warm_prefill_is_flagged(_sim(), 6000)


def test_the_probes_of_a_run_and_its_repeats_start_their_prompts_apart(tiny_model: Any) -> None:
    """Not a shared head with a new tail: the texts differ from their first words on, so no cache block (vLLM
    hashes whole blocks from the start) and no common prefix (llama.cpp) is shared."""
    counter = LocalTokenizer(str(tiny_model.tokenizer_json))

    def opening(ctx: ProbeContext, probe: str) -> list[str]:
        workload = Workload.long_document(PREFILL_TOKENS, 4, **ctx.for_probe(probe).seeds)
        turn = asyncio.run(RequestFactory(workload, counter, "completions").conversation(0)).turns[0]
        return turn.fields["prompt"].split()[:4]

    first = _ctx(_sim(), "baseline", 0)
    openings = {
        "acceptance": opening(first, "acceptance"),
        "long_prefill": opening(first, "long_prefill"),
        "long_prefill, next repeat": opening(_ctx(_sim(), "baseline", 1), "long_prefill"),
        "long_prefill, other variant": opening(_ctx(_sim(), "two-slots", 0), "long_prefill"),
    }
    print(openings)
    assert len({tuple(words) for words in openings.values()}) == len(openings), openings
    assert opening(first, "long_prefill") == openings["long_prefill"], "the same prompts on every rerun"


COMMON_LOAD = {"rate": 8.0, "requests": 6, "input_tokens": 160, "output_tokens": 4, "spread": 0.25}
"""fixed_load with drawn lengths and arrivals: what the tuner's common draws make the same across variants."""


def _common_draws_stay_cold(backend: Backend) -> None:
    """Repeat r of two variants, on one engine (variants sharing a launch): the same arrivals and lengths, other
    words, so every run is cold by the engine's counters and servetune's reconciliation says so."""
    draws = {}
    for repeat in range(2):
        for variant in ("baseline", "two-slots"):
            result = _probe(_ctx(backend, variant, repeat), "fixed_load", **COMMON_LOAD)
            checked = result.reconciliation
            assert checked is not None and checked.checks, result.warnings
            print(f"{variant}/{repeat}: evaluated {checked.evaluated_tokens:.0f}, flagged {checked.flagged}")
            assert result.ok and not checked.flagged, result.warnings
            assert checked.evaluated_tokens >= 6 * (160 * 0.75 - 32), "every prompt evaluated, bar a template's head"
            draws[(variant, repeat)] = result.draw
    assert draws[("baseline", 0)] == draws[("two-slots", 0)] != draws[("baseline", 1)], draws


def test_common_draws_across_variants_stay_cold_on_llama_cpp(llama_server: Any, tiny_model: Any) -> None:
    _common_draws_stay_cold(_live(llama_server, tiny_model))


def test_common_draws_across_variants_stay_cold_on_the_simulator() -> None:
    _common_draws_stay_cold(_sim())


def _prefix_reuse_hits_its_own_prefix_only(backend: Backend, system_tokens: int) -> None:
    """prefix_reuse shares a prefix on purpose and reports the engine's hit rate; its first request is cold, and
    the same probe again with one seed (its system prompt cached before it starts) is caught."""
    ctx = _ctx(backend, "reuse", 0)
    first = _probe(ctx, "prefix_reuse", system_tokens=system_tokens, max_tokens=4)
    assert first.ok and first.reconciliation is not None and not first.reconciliation.flagged, first.warnings
    assert (first.figures["hit_rate_pct"] or 0) > 50, first.figures
    again = _probe(ctx, "prefix_reuse", system_tokens=system_tokens, max_tokens=4)
    assert again.reconciliation is not None and not again.ok
    assert [c.name for c in again.reconciliation.flagged] == ["cached_tokens"], again.reconciliation
    assert any("first request was not cold" in w for w in again.warnings), again.warnings


def test_prefix_reuse_shares_only_its_own_prefix_on_llama_cpp(llama_server: Any, tiny_model: Any) -> None:
    _prefix_reuse_hits_its_own_prefix_only(_live(llama_server, tiny_model), ACCEPT_TOKENS)


def test_prefix_reuse_shares_only_its_own_prefix_on_the_simulator() -> None:
    _prefix_reuse_hits_its_own_prefix_only(_sim(), 4096)


class _Uncounted(SimBackend):
    """The simulator without its /metrics: an engine with neither counters nor per-response timings."""

    async def scrape(self) -> MetricsSnapshot | None:
        return None


def test_an_engine_without_counters_is_said_not_reconciled_and_not_judged() -> None:
    config = EngineConfig(engine="sim", model="qwen3.6-27b", flags={"gpu": "H200", "max-model-len": 8192})
    result = _probe(ProbeContext(_Uncounted(deployment_for_config(config))), "long_prefill", prompt_tokens=2000)
    assert result.ok and result.reconciliation is not None and not result.reconciliation.checks
    assert "not reconciled" in result.reconciliation.notes[0]


@pytest.fixture(scope="module")
def llama_without_metrics(tiny_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """llama.cpp as it starts by default: no --metrics, so its per-response timings are its only account."""
    cfg = EngineConfig(
        engine="llamacpp",
        model=str(tiny_model.gguf_path),
        served_model_name=tiny_model.served_name,
        flags={"ctx-size": 8192, "parallel": 4},
    )
    engine = launch(cfg, log_dir=Path(tmp_path_factory.mktemp("llama-no-metrics")), startup_timeout_s=120)
    try:
        yield engine
    finally:
        report = engine.stop()
        assert report is not None and report.clean, f"engine left processes behind: {report}"


@pytest.mark.engine
def test_long_prefill_is_reconciled_by_llama_cpp_timings_without_metrics(
    llama_without_metrics: Any, tiny_model: Any
) -> None:
    """Without --metrics a llama.cpp run was "not reconciled" and still ok; its answers' timings now prove each
    long_prefill cold (evaluated = requested), across variants and repeats, in the suite's order."""
    backend = _live(llama_without_metrics, tiny_model)
    assert asyncio.run(backend.scrape()) is None, "no /metrics"
    for variant in ("baseline", "two-slots"):
        for repeat in range(2):
            ctx = _ctx(backend, variant, repeat)
            accept = _probe(ctx, "acceptance", long_context_tokens=ACCEPT_TOKENS)
            assert accept.figures["passed"] == 1.0, accept.notes
            prefill = _probe(ctx, "long_prefill", prompt_tokens=PREFILL_TOKENS, max_tokens=4)
            checked = prefill.reconciliation
            assert checked is not None and checked.source == "timings", checked
            requested = prefill.figures["prompt_tokens"]
            print(f"{variant}/{repeat}: requested {requested:.0f}, evaluated {checked.evaluated_tokens:.0f}")
            assert prefill.ok and not checked.flagged, prefill.warnings
            assert checked.evaluated_tokens == requested, "every prompt token evaluated, by llama.cpp's own timings"
            assert {c.name for c in checked.checks} == {"prompt_tokens", "output_tokens", "cached_tokens"}


@pytest.mark.engine
def test_a_warm_prefill_is_flagged_by_llama_cpp_timings_without_metrics(
    llama_without_metrics: Any, tiny_model: Any
) -> None:
    _warm_prefill_is_flagged(_live(llama_without_metrics, tiny_model), PREFILL_TOKENS)
