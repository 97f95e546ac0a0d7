"""Roofline: the step-time model behaves like a roofline and stays within the reference's ballpark."""

from __future__ import annotations

from pathlib import Path

from servetune.hardware.catalog import get_gpu
from servetune.model.spec import load_model_spec
from servetune.plan.roofline import Efficiency, accepted_tokens, decode_step_time, model_costs, prefill_time, step_time


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
    assert decode_step_time(costs, gpu, batch=8, context=[1000] * 4 + [100_000] * 4).seconds > \
        decode_step_time(costs, gpu, batch=8, context=1000).seconds
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
    assert decode_step_time(costs, gpu, batch=1, context=1).bytes < 0.2 * decode_step_time(costs, gpu, batch=512, context=1).bytes


def test_efficiency_profile_roundtrip(tmp_path: Path) -> None:
    eff = Efficiency(bandwidth=0.8, mfu_prefill=0.55)
    eff.save(tmp_path / "eff.json")
    assert Efficiency.load(tmp_path / "eff.json") == eff
    assert accepted_tokens(2, 0.5) == 0.75
