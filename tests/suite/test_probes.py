"""Each probe alone against real engines serving the tiny model (session-scoped servers from conftest)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from servetune.suite import params
from servetune.suite.client import metrics_scraper
from servetune.suite.probes import PROBE_FUNCTIONS
from servetune.suite.result import ProbeResult
from servetune.suite.target import Target


def _target(engine: Any, tiny_model: Any, **kw: Any) -> Target:
    return Target(
        base_url=engine.base_url,
        model=engine.model_name,
        tokenizer=str(tiny_model.tokenizer_json),
        client=params.ClientSpec(endpoint="completions"),
        max_model_len=engine.facts.max_model_len,
        scrape=metrics_scraper(engine.base_url),
        seed=kw.pop("seed", 7),
        **kw,
    )


def _run(name: str, target: Target, settings: Any) -> ProbeResult:
    return asyncio.run(PROBE_FUNCTIONS[name](target, settings))


def test_single_stream_probes_on_llama_cpp(llama_server: Any, tiny_model: Any) -> None:
    target = _target(llama_server, tiny_model)
    short = _run("short_latency", target, params.ShortLatency(max_tokens=8))
    assert short.ok and 0 < short.figures["ttft_ms"] <= short.figures["e2el_ms"]
    decode = _run("decode_speed", target, params.DecodeSpeed(output_tokens=64))
    assert decode.ok and decode.figures["output_tokens"] == 64, "the requested length arrived"
    assert decode.figures["output_tok_s"] > 0 and decode.figures["decode_tok_s"] > 0
    prefill = _run("long_prefill", target, params.LongPrefill(prompt_tokens=100_000))
    assert prefill.ok and prefill.notes and "capped" in prefill.notes[0], "capped to the slot's context"
    assert prefill.figures["prompt_tokens"] < llama_server.facts.max_model_len
    accept = _run("acceptance", target, params.Acceptance(long_context_tokens=512))
    assert accept.figures["passed"] == 1.0 and accept.figures["model_listed"] == 1.0
    memory = _run("memory_headroom", target, params.MemoryHeadroom())
    assert 0 < memory.figures["headroom_pct"] < 100 and "host memory" in memory.notes[0]


def test_load_curve_stops_at_saturation_and_reports_goodput(llama_server: Any, tiny_model: Any) -> None:
    target = _target(llama_server, tiny_model, slos={"ttft_p99_ms": 60_000})
    curve = _run(
        "load_curve",
        target,
        params.LoadCurve(concurrency=[1, 2, 4, 8, 16, 32], requests_per_point=8, input_tokens=32, output_tokens=16),
    )
    assert curve.ok and 1 <= len(curve.points) <= 6
    assert [p["concurrency"] for p in curve.points] == [1, 2, 4, 8, 16, 32][: len(curve.points)]
    assert curve.figures["max_output_tok_s"] > 0
    assert all("ttft_p99_ms" in p and "output_tok_s" in p for p in curve.points)


def test_prefix_reuse_reads_vllm_prefix_cache_counters(vllm_server: Any, tiny_model: Any) -> None:
    target = _target(vllm_server, tiny_model, seed=11)
    result = _run("prefix_reuse", target, params.PrefixReuse(system_tokens=512))
    assert result.ok, result.error
    assert result.figures["hit_rate_pct"] is not None and result.figures["hit_rate_pct"] > 50, result.figures
    again = _run("long_generation", target, params.LongGeneration(output_tokens=64))
    assert again.ok and any("speculative" in n for n in again.notes), "no spec decode: said so, not a number"


@pytest.mark.parametrize("name", sorted(PROBE_FUNCTIONS))
def test_every_probe_has_a_settings_model(name: str) -> None:
    assert name in params.Probes.model_fields
