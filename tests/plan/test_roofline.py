"""Roofline: the step-time model behaves like a roofline and stays within the reference's ballpark."""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.hardware.catalog import get_gpu
from servetune.model.hf_config import load_model_spec
from servetune.plan.roofline import (
    Efficiency,
    accepted_tokens,
    decode_step_time,
    model_costs,
    prefill_time,
    step_time,
)


def test_single_stream_decode_is_bandwidth_bound_and_near_reference() -> None:
    spec = load_model_spec("qwen3.6-27b", language_model_only=True)
    costs = model_costs(spec, tp=1)
    h200 = get_gpu("H200")
    step = decode_step_time(costs, h200, batch=1, context=1024, ideal=True)
    assert step.bound == "memory"
    # reference calculator: 1xH200 BF16, B=1, 1K context, ideal ~93 tok/s
    assert 85 < 1 / step.seconds < 100
    expected = decode_step_time(costs, h200, batch=1, context=1024)
    assert expected.seconds > step.seconds


def test_batching_amortises_weights_and_long_context_costs_more() -> None:
    spec = load_model_spec("qwen3-32b")
    costs = model_costs(spec, tp=2)
    gpu = get_gpu("A100-80G-SXM")
    one = decode_step_time(costs, gpu, batch=1, context=2048)
    many = decode_step_time(costs, gpu, batch=64, context=2048)
    assert many.seconds < 64 * one.seconds / 10
    assert (
        decode_step_time(costs, gpu, batch=8, context=[1000] * 4 + [100_000] * 4).seconds
        > decode_step_time(costs, gpu, batch=8, context=1000).seconds
    )
    assert one.comm_s > 0  # TP2 all-reduces


def test_prefill_is_compute_bound_and_quadratic_term_counts() -> None:
    spec = load_model_spec("qwen3-32b")
    costs = model_costs(spec, tp=1)
    gpu = get_gpu("H100")
    assert step_time(costs, gpu, prefill=[(8192, 0)]).bound == "compute"
    short = prefill_time(costs, gpu, tokens=4096)
    long = prefill_time(costs, gpu, tokens=32768)
    assert long > 8 * short  # superlinear: attention T^2
    assert prefill_time(costs, gpu, tokens=4096, cached=28672) > short  # attending to cached context costs


def test_moe_reads_only_touched_experts() -> None:
    costs = model_costs(load_model_spec("qwen3-30b-a3b"), tp=1)
    gpu = get_gpu("H100")
    assert (
        decode_step_time(costs, gpu, batch=1, context=1).bytes
        < 0.2 * decode_step_time(costs, gpu, batch=512, context=1).bytes
    )


def test_efficiency_profile_roundtrip(tmp_path: Path) -> None:
    eff = Efficiency(bandwidth=0.8, mfu_prefill=0.55)
    eff.save(tmp_path / "eff.json")
    assert Efficiency.load(tmp_path / "eff.json") == eff
    assert accepted_tokens(2, 0.5) == 0.75


@pytest.mark.parametrize(
    ("gpu", "tp", "quant", "ideal_1k", "ideal_128k"),
    [
        ("A100-80G-SXM", 2, None, 79, 68),
        ("A100-80G-SXM", 1, "awq", 131, 85),
        ("H100-SXM", 1, None, 65, 56),
        ("H200", 1, None, 93, 80),
        ("V100-32G", 1, "gptq", 58, 37),
        ("A10G", 1, "awq", 38, 25),
        ("RTX-3090", 1, "awq", 60, 39),
    ],
)
def test_ideal_decode_matches_the_reference_calculator(
    gpu: str, tp: int, quant: str | None, ideal_1k: int, ideal_128k: int
) -> None:
    """Qwen3.6-27B single-stream ceilings from the shared reference's independent calculator (section 5.2)."""
    costs = model_costs(load_model_spec("qwen3.6-27b", language_model_only=True, quantization=quant), tp=tp)
    g = get_gpu(gpu)
    assert abs(1 / decode_step_time(costs, g, batch=1, context=1024, ideal=True).seconds - ideal_1k) <= 0.6
    assert abs(1 / decode_step_time(costs, g, batch=1, context=131072, ideal=True).seconds - ideal_128k) <= 0.6


def test_expected_decode_near_a_measured_rtx3090() -> None:
    """A community run (vLLM 0.20.2, RTX 3090, Qwen3.6-27B W4A16 text-only) measured ~36 tok/s single-stream."""
    costs = model_costs(load_model_spec("qwen3.6-27b", language_model_only=True, quantization="awq"), tp=1)
    expected = 1 / decode_step_time(costs, get_gpu("RTX-3090"), batch=1, context=1024).seconds
    assert 30 < expected < 50


def test_prefill_flops_match_the_reference_calculator() -> None:
    """Qwen3.6-27B prefill FLOPs (reference section 5.2): 2K 106 TFLOP, 32K 1.89 PFLOP, 128K 10.1 PFLOP."""
    costs = model_costs(load_model_spec("qwen3.6-27b", language_model_only=True), tp=2)
    gpu = get_gpu("A100-80G-SXM")
    for tokens, tflop in ((2048, 106), (32768, 1890), (131072, 10100)):
        assert abs(step_time(costs, gpu, prefill=[(tokens, 0)]).flops / 1e12 / tflop - 1) < 0.01


@pytest.mark.parametrize("model", ["qwen3.6-27b", "qwen3-30b-a3b"])
def test_prefill_time_closed_form_equals_the_step_loop(model: str) -> None:
    """`prefill_time` sums its chunks in closed form (issue 16: a 10^12-token prompt or a 1-token budget must not
    loop); it equals pricing every chunk one by one."""
    costs = model_costs(load_model_spec(model), tp=1)
    gpu = get_gpu("H200")
    for tokens, chunk, cached in (
        (1, 8192, 0),
        (8192, 8192, 0),
        (8193, 8192, 0),
        (100_000, 2048, 0),
        (50_000, 333, 1000),
    ):
        for ideal in (False, True):
            looped, done = 0.0, 0
            while done < tokens:
                n = min(chunk, tokens - done)
                looped += step_time(costs, gpu, prefill=[(n, cached + done)], ideal=ideal).seconds
                done += n
            assert prefill_time(costs, gpu, tokens=tokens, cached=cached, chunk=chunk, ideal=ideal) == pytest.approx(
                looped, rel=1e-9
            )
    assert prefill_time(costs, gpu, tokens=999_999_999_999, chunk=1) > 0  # returns at once
