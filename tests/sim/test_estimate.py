"""The simulator on the seeds' Qwen3.6-27B / 2xA100 deployment: capacity and preemption as planned."""

from __future__ import annotations

import pytest

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.hardware.catalog import get_gpu
from servetune.plan.api import plan_for
from servetune.sim.deployment import build_deployment
from servetune.sim.estimate import SimWorkload, estimate, estimate_config
from servetune.sim.flags import parse_sim_args

BASE = [
    "qwen3.6-27b",
    "--tensor-parallel-size",
    "2",
    "--max-model-len",
    "131072",
    "--language-model-only",
    "--gpu",
    "A100-80G-SXM",
]


@pytest.fixture(scope="module")
def deployment():
    return build_deployment(parse_sim_args(BASE))


def test_capacity_equals_the_planner(deployment) -> None:
    cfg = EngineConfig(
        model="qwen3.6-27b", flags={"tensor-parallel-size": 2, "max-model-len": 131072, "language-model-only": True}
    )
    plan = plan_for(cfg, get_gpu("A100-80G-SXM"), 2)
    assert deployment.limits.num_blocks == plan.num_blocks
    assert deployment.limits.block_size == plan.block_size
    assert deployment.kv_cache_tokens == plan.kv_cache_tokens
    assert list(deployment.capacity_lines) == plan.log_lines
    assert any(line.startswith("GPU KV cache size: ") for line in deployment.startup_lines())


def test_workload_beyond_kv_capacity_preempts(deployment) -> None:
    # 64 requests that each grow to 36k tokens need ~2.3M tokens of KV; the pool holds ~1.3M.
    big = estimate(deployment, SimWorkload(num_requests=64, input_len=32768, output_len=4096, concurrency=64))
    assert big.kv_cache_tokens < 64 * (32768 + 4096)
    assert big.num_preemptions > 0
    assert big.completed == 64
    small = estimate(deployment, SimWorkload(num_requests=64, input_len=1024, output_len=128, concurrency=64))
    assert small.num_preemptions == 0


def test_shared_prefix_hits_only_with_prefix_caching() -> None:
    workload = SimWorkload(num_requests=40, input_len=6000, output_len=16, shared_prefix_len=4000, concurrency=4)
    on = estimate(build_deployment(parse_sim_args([*BASE, "--enable-prefix-caching"])), workload)
    off = estimate(build_deployment(parse_sim_args([*BASE, "--no-enable-prefix-caching"])), workload)
    # Hybrid 'align' mode: hits are whole 784-token blocks up to the saved state (3136 of the 4000 tokens).
    assert 0.4 < on.prefix_cache_hit_rate < 4000 / 6000
    assert off.prefix_cache_hit_rate == 0
    assert on.ttft_ms.p50 < off.ttft_ms.p50


def test_max_num_seqs_caps_concurrency() -> None:
    dep = build_deployment(parse_sim_args([*BASE, "--max-num-seqs", "8"]))
    result = estimate(dep, SimWorkload(num_requests=64, input_len=512, output_len=64, concurrency=32))
    assert result.max_running == 8
    wide = estimate(
        build_deployment(parse_sim_args(BASE)),
        SimWorkload(num_requests=64, input_len=512, output_len=64, concurrency=32),
    )
    assert wide.max_running == 32
    assert result.ttft_ms.p50 > wide.ttft_ms.p50


def test_speculative_decoding_speeds_up_decode() -> None:
    spec = '{"method":"mtp","num_speculative_tokens":2}'
    workload = SimWorkload(num_requests=4, input_len=1024, output_len=256, concurrency=1)
    plain = estimate(build_deployment(parse_sim_args(BASE)), workload)
    mtp = estimate(
        build_deployment(parse_sim_args([*BASE, "--speculative-config", spec, "--acceptance-rate", "0.8"])), workload
    )
    assert mtp.tpot_ms.p50 < 0.8 * plain.tpot_ms.p50


def test_estimate_config_api_and_bad_input() -> None:
    cfg = EngineConfig(
        engine="sim",
        model="qwen3.6-27b",
        flags={"tensor-parallel-size": 2, "max-model-len": "128K", "language-model-only": True},
    )
    result = estimate_config(cfg, SimWorkload(num_requests=20, concurrency=4), gpu="A100-80G-SXM")
    assert result.completed == 20 and result.output_throughput > 0
    with pytest.raises(ServetuneError):
        estimate_config(
            cfg.with_flags(max_model_len=262144, gpu_memory_utilization=0.33),
            SimWorkload(num_requests=2, concurrency=1),
            gpu="A100-80G-SXM",
        )


def test_vllm_log_parser_reads_the_simulators_startup(deployment) -> None:
    from servetune.engines.vllm import parse_vllm_log

    log = "\n".join(f"INFO 11-30 12:00:00 [sim_serve.py:1] {line}" for line in deployment.startup_lines())
    facts = parse_vllm_log(log + "\nINFO:     Application startup complete.\n")
    assert facts.kv_cache_tokens == deployment.kv_cache_tokens
    assert facts.block_size == deployment.limits.block_size
    assert facts.max_concurrency == round(deployment.max_concurrency, 2)
    assert facts.available_kv_gib == round(deployment.available_kv_gib, 2)


def test_estimate_for_a_load_room_workload() -> None:
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Workload
    from servetune.sim.estimate import estimate_load

    cfg = EngineConfig(
        model="qwen3.6-27b",
        flags={
            "tensor-parallel-size": 2,
            "max-model-len": 131072,
            "language-model-only": True,
            "enable-prefix-caching": True,
        },
    )
    shared = Workload.shared_prefix(4000, 2000, 16, seed=1)
    result = estimate_load(cfg, shared, LoadShape(kind="concurrency", concurrency=4, requests=40), gpu="A100-80G-SXM")
    assert result.completed == 40 and result.prefix_cache_hit_rate > 0.4
    poisson = estimate_load(
        cfg, Workload.synthetic(512, 64), LoadShape(kind="rate", rate=2.0, requests=30), gpu="A100-80G-SXM"
    )
    assert poisson.completed == 30 and poisson.duration_s > 10


def test_fast_forward_equals_stepping(deployment, monkeypatch) -> None:
    from servetune.sim.scheduler import Scheduler
    from servetune.sim.virtual import RequestSpec, run_virtual

    specs = [RequestSpec(700 + 37 * i, 90 + 11 * i) for i in range(12)]
    fast = run_virtual(specs, deployment.limits, deployment.timing, concurrency=3)
    monkeypatch.setattr(Scheduler, "quiet_decode_steps", lambda self: 0)
    slow = run_virtual(specs, deployment.limits, deployment.timing, concurrency=3)
    assert fast.num_steps == slow.num_steps
    for a, b in zip(fast.timelines, slow.timelines):
        assert a.chunk_tokens == b.chunk_tokens
        assert a.chunk_times == pytest.approx(b.chunk_times, rel=1e-9)
