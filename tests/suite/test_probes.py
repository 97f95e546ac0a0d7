"""Each probe alone against real engines serving the tiny model (session-scoped servers from conftest), through the
same `run_probe` the suite and the tuner's estimates use."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from servetune.load.backend import ClientSpec, LiveBackend
from servetune.suite.params import Probes
from servetune.suite.probes._common import UNTIMED_DECODE
from servetune.suite.registry import all_probes, get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext


def _ctx(engine: Any, tiny_model: Any, *, seed: int = 7, slos: dict[str, float] | None = None) -> ProbeContext:
    backend = LiveBackend(
        engine.base_url,
        engine.model_name,
        client=ClientSpec(endpoint="completions", tokenizer=str(tiny_model.tokenizer_json)),
        engine=engine.cfg.engine,
        max_model_len=engine.facts.max_model_len,
    )
    return ProbeContext(backend, slos=slos or {}, seed=seed)


def _run(name: str, ctx: ProbeContext, **settings: Any) -> ProbeResult:
    spec = get_probe(name)
    return asyncio.run(run_probe(spec, ctx, spec.params.model_validate(settings)))


def test_single_stream_probes_on_llama_cpp(llama_server: Any, tiny_model: Any) -> None:
    ctx = _ctx(llama_server, tiny_model)
    short = _run("short_latency", ctx, max_tokens=8)
    assert short.ok and 0 < short.figures["ttft_ms"] <= short.figures["e2el_ms"]
    decode = _run("decode_speed", ctx, output_tokens=64)
    assert decode.ok and decode.figures["output_tokens"] == 64, "the requested length arrived"
    assert decode.figures["output_tok_s"] > 0
    # A busy machine can stall the client while the tiny model streams 64 tokens in a few ms: they are then read
    # at once, and the probe says it could not time the decode instead of reporting an infinite speed.
    untimed = UNTIMED_DECODE in decode.notes
    assert (decode.figures["decode_tok_s"] or 0) > 0 or (untimed and decode.figures["tpot_ms"] == 0), decode
    prefill = _run("long_prefill", ctx, prompt_tokens=100_000)
    assert prefill.ok and prefill.notes and "capped" in prefill.notes[0], "capped to the slot's context"
    assert prefill.figures["prompt_tokens"] < llama_server.facts.max_model_len
    accept = _run("acceptance", ctx, long_context_tokens=512)
    assert accept.figures["passed"] == 1.0 and accept.figures["model_listed"] == 1.0, accept.notes
    memory = _run("memory_headroom", ctx)
    assert 0 < memory.figures["headroom_pct"] < 100 and "host memory" in memory.notes[0]


def test_load_curve_stops_at_saturation_and_reports_goodput(llama_server: Any, tiny_model: Any) -> None:
    ctx = _ctx(llama_server, tiny_model, slos={"ttft_p99_ms": 60_000})
    curve = _run(
        "load_curve", ctx, concurrency=[1, 2, 4, 8, 16, 32], requests_per_point=8, input_tokens=32, output_tokens=16
    )
    assert curve.ok and 1 <= len(curve.points) <= 6
    assert [p["concurrency"] for p in curve.points] == [1, 2, 4, 8, 16, 32][: len(curve.points)]
    assert curve.figures["max_output_tok_s"] > 0 and curve.figures["goodput_rps"] > 0
    assert all("ttft_p99_ms" in p and "output_tok_s" in p for p in curve.points)


def test_prefix_reuse_reads_vllm_prefix_cache_counters(vllm_server: Any, tiny_model: Any) -> None:
    ctx = _ctx(vllm_server, tiny_model, seed=11)
    result = _run("prefix_reuse", ctx, system_tokens=512)
    assert result.ok, result.error
    assert result.figures["hit_rate_pct"] is not None and result.figures["hit_rate_pct"] > 50, result.figures
    again = _run("long_generation", ctx, output_tokens=64)
    assert again.ok and any("speculative" in n for n in again.notes), "no spec decode: said so, not a number"


@pytest.mark.parametrize("name", sorted(all_probes()))
def test_every_probe_is_defined_once_with_its_settings_and_figures(name: str) -> None:
    spec = all_probes()[name]
    assert name in Probes.model_fields and Probes.model_fields[name].annotation is not None
    assert spec.figures and all(f.unit is not None and f.better in ("higher", "lower", "none") for f in spec.figures)
    assert spec.summary and spec.params().model_dump() is not None  # defaults make a valid probe
    timed = [f for f in (*spec.figures, *spec.point_figures) if f.unit in ("ms", "s")]
    assert all(f.scaling == "time" for f in timed), "every duration converts with a time-scaled simulator"


def test_a_decode_read_all_at_once_is_called_untimed_not_infinitely_fast() -> None:
    from servetune.suite.probes._common import speed_values
    from servetune.suite.requests import Reply

    figures, notes = speed_values(Reply(ok=True, ttft_s=0.2, e2el_s=0.2, tpot_s=0.0, output_tokens=64), 64)
    assert figures["tpot_ms"] == 0 and figures["decode_tok_s"] is None and notes == [UNTIMED_DECODE]
    figures, notes = speed_values(Reply(ok=True, ttft_s=0.1, e2el_s=0.73, tpot_s=0.01, output_tokens=64), 64)
    assert figures["decode_tok_s"] == pytest.approx(100) and notes == []
