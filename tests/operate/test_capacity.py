"""The memory rule of a switch, a restart and a fallback (operate/capacity.py), on the H200 as the planner and the
recorded vLLM 0.24.0 logs of the tuning table see it: fits side by side, drain-and-replace, refused (each case),
the KV capacity each engine keeps, and the gate of a restart. No engine runs here (the engine tests beside this
file run each case for real on CPU engines)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.launch import RunningEngine
from servetune.engines.vllm import VllmAdapter, parse_vllm_log
from servetune.hardware.catalog import GiB, get_gpu
from servetune.operate.capacity import (
    OUTSIDE_BUDGET_BYTES,
    Device,
    Footprint,
    decide_switch,
    gate,
    held,
    need,
)
from servetune.operate.fallback import set_flag
from servetune.operate.sizing import COLD_START_HEADROOM
from servetune.operate.starts import StartEstimate

TABLE = Path(__file__).resolve().parents[2] / "benchmarks" / "tuning_table" / "data"
FLAGS = {
    "kv-cache-dtype": "auto",
    "max-num-batched-tokens": 8192,
    "max-num-seqs": 256,
    "max-model-len": 32768,
    "language-model-only": True,
    "additional-config": {"gdn_prefill_backend": "triton"},
    "load-format": "dummy",
}
"""The tuning table's default row (Qwen3.6-27B on one H200, vLLM 0.24.0): its log is blue's."""
WARM = StartEstimate(seconds=80.0, expect="warm", basis="a measured warm start")
H200 = get_gpu("H200")


def _device(**kw: object) -> Device:
    return Device(kind="gpu", name="1x H200", gpu=H200, total_bytes=H200.memory_bytes, source="test", **kw)


def _engine(cfg: EngineConfig, facts: EngineFacts) -> RunningEngine:
    return RunningEngine(cfg, VllmAdapter(), None, "http://127.0.0.1:9", facts, None, None)


@pytest.fixture(scope="module")
def logged() -> EngineFacts:
    return parse_vllm_log(gzip.decompress((TABLE / "kv-auto_mnbt-8192_mns-256" / "vllm.log.gz").read_bytes()).decode())


def _cfg(**flags: object) -> EngineConfig:
    cfg = EngineConfig(engine="vllm", model="qwen3.6-27b", flags=dict(FLAGS), version="0.24.0")
    for key, value in flags.items():
        cfg = set_flag(cfg, key.replace("_", "-"), value)  # type: ignore[arg-type]
    return cfg


def _plan(blue: Footprint | None, green: Footprint, *, max_unavailable_s: float = 0.0, device: Device | None = None):
    return decide_switch(
        device or _device(),
        blue,
        [],
        green,
        WARM,
        drain_s=30.0,
        stop_grace_s=10.0,
        startup_timeout_s=600.0,
        max_unavailable_s=max_unavailable_s,
    )


def test_the_planner_calibrated_on_blues_log_predicts_the_kv_capacity_vllm_logged(logged: EngineFacts) -> None:
    """Green with blue's config (its default 0.92) is predicted from blue's logged KV memory: the same 1,138,141
    tokens vLLM 0.24.0 logged on the H200; the uncalibrated planner is within its stated range of it."""
    blue = _engine(_cfg(), logged)
    assert logged.kv_cache_tokens == 1_138_141
    twin = need(_cfg(), _device(), "green", like=blue)
    assert isinstance(twin, Footprint) and twin.kv_tokens == logged.kv_cache_tokens
    assert "calibrated on blue's logged" in str(twin.kv_source)
    alone = need(_cfg(), _device(), "green")
    assert isinstance(alone, Footprint) and alone.kv_tokens_range is not None
    low, high = alone.kv_tokens_range
    assert low <= logged.kv_cache_tokens <= high
    assert abs(alone.kv_tokens - logged.kv_cache_tokens) / logged.kv_cache_tokens < 0.02  # type: ignore[operator]


def test_a_share_each_fits_side_by_side_and_says_what_each_keeps(logged: EngineFacts) -> None:
    blue = held(_engine(_cfg(gpu_memory_utilization=0.45), logged), _device(), "blue")
    green = need(_cfg(gpu_memory_utilization=0.45, max_num_seqs=128), _device(), "green")
    assert isinstance(green, Footprint)
    plan = _plan(blue, green)
    assert plan.decision == "side_by_side" and plan.proceeds and plan.unavailable_bound_s is None
    budget = -(-H200.memory_bytes * 45 // 100)
    assert blue.bytes == green.bytes == budget + OUTSIDE_BUDGET_BYTES
    assert blue.kv_tokens == 1_138_141 and blue.kv_source == "vllm startup log"
    assert green.kv_tokens and 100_000 < green.kv_tokens < 200_000 and "planner" in str(green.kv_source)
    text = "\n".join(plan.lines())
    assert "fits side by side" in text and "gpu-memory-utilization 0.45" in text and f"{green.kv_tokens:,}" in text


def test_blue_at_the_default_leaves_too_little_drain_and_replace_only_when_allowed(logged: EngineFacts) -> None:
    """Blue at vLLM's default 0.92 leaves 0.08 of the GPU: green at 0.45 fits only with blue stopped. Refused by
    default (0 s allowed), with the fixes; a drain-and-replace when the bound allows the worst case."""
    blue = held(_engine(_cfg(), logged), _device(), "blue")
    green = need(_cfg(gpu_memory_utilization=0.45), _device(), "green")
    assert isinstance(green, Footprint)
    refused = _plan(blue, green)
    bound = 30.0 + 10.0 + COLD_START_HEADROOM * 80.0
    assert refused.decision == "refuse" and not refused.proceeds
    assert refused.unavailable_bound_s == bound and refused.unavailable_s == 80.0
    assert any(f"--max-unavailable-s {bound:.0f}" in fix for fix in refused.fixes)
    assert any("share each" in fix for fix in refused.fixes)
    allowed = _plan(blue, green, max_unavailable_s=bound)
    assert allowed.decision == "drain_and_replace" and allowed.proceeds
    assert allowed.room_beside_bytes is not None and allowed.room_beside_bytes < green.bytes
    assert allowed.room_alone_bytes is not None and allowed.room_alone_bytes >= green.bytes


def test_green_that_cannot_run_even_alone_is_refused_with_the_planners_fixes(logged: EngineFacts) -> None:
    blue = held(_engine(_cfg(), logged), _device(), "blue")
    green = need(_cfg(gpu_memory_utilization=0.3), _device(), "green")  # 50 GiB of weights in a 42 GiB budget
    assert isinstance(green, Footprint) and green.problem and "weights need" in green.problem
    plan = _plan(blue, green, max_unavailable_s=3600)
    assert plan.decision == "refuse" and "even alone" in plan.reason
    assert any("gpu-memory-utilization" in fix or "tensor-parallel-size" in fix for fix in plan.fixes)


def test_the_fix_sizes_green_into_what_blue_leaves_or_says_none_fits(logged: EngineFacts) -> None:
    blue_engine = _engine(_cfg(gpu_memory_utilization=0.45), logged)
    blue = held(blue_engine, _device(), "blue")
    green_cfg = _cfg(gpu_memory_utilization=0.6)
    green = need(green_cfg, _device(), "green")
    assert isinstance(green, Footprint)
    plan = decide_switch(
        _device(),
        blue,
        [],
        green,
        WARM,
        drain_s=30.0,
        stop_grace_s=10.0,
        startup_timeout_s=600.0,
        max_unavailable_s=0.0,
        green_at=lambda u: need(set_flag(green_cfg, "gpu-memory-utilization", u), _device(), "green"),
    )
    assert plan.decision == "refuse"
    assert (
        plan.fixes[0].startswith("size green to fit beside blue: gpu-memory-utilization 0.53")
        and "KV cache" in (plan.fixes[0])
    )
    crowded = held(_engine(_cfg(gpu_memory_utilization=0.7), logged), _device(), "blue")
    plan = decide_switch(
        _device(),
        crowded,
        [],
        green,
        WARM,
        drain_s=30.0,
        stop_grace_s=10.0,
        startup_timeout_s=600.0,
        max_unavailable_s=0.0,
        green_at=lambda u: need(set_flag(green_cfg, "gpu-memory-utilization", u), _device(), "green"),
    )
    assert plan.fixes[0].startswith("no gpu-memory-utilization of green fits beside blue")


def test_measured_free_memory_and_the_limit_bound_the_room(logged: EngineFacts) -> None:
    """NVML's free memory counts what serve does not run (another process); --memory-limit-gib caps serve."""
    blue = held(_engine(_cfg(gpu_memory_utilization=0.45), logged), _device(), "blue")
    green = need(_cfg(gpu_memory_utilization=0.45), _device(), "green")
    assert isinstance(green, Footprint)
    squeezed = _plan(blue, green, device=_device(free_bytes=40 * GiB))
    assert squeezed.decision == "refuse" and squeezed.room_beside_bytes == 40 * GiB
    capped = _plan(blue, green, device=_device(limit_bytes=100 * GiB), max_unavailable_s=600)
    assert capped.decision == "drain_and_replace" and capped.room_beside_bytes == 100 * GiB - blue.bytes


def test_an_unmeasured_start_is_bounded_by_the_startup_timeout(logged: EngineFacts) -> None:
    blue = held(_engine(_cfg(), logged), _device(), "blue")
    green = need(_cfg(gpu_memory_utilization=0.45), _device(), "green")
    assert isinstance(green, Footprint)
    plan = decide_switch(
        _device(),
        blue,
        [],
        green,
        StartEstimate(seconds=None, expect="cold", basis="nothing measured"),
        drain_s=30.0,
        stop_grace_s=10.0,
        startup_timeout_s=600.0,
        max_unavailable_s=0.0,
    )
    assert plan.unavailable_s is None and plan.unavailable_bound_s == 640.0


def test_a_restart_waits_while_memory_serve_does_not_hold_is_taken_and_refuses_what_cannot_fit() -> None:
    """After a kill -9 the GPU driver releases the dead engine's memory late: NVML shows it taken, the restart
    waits; a config larger than serve may hold is refused (a failure no restart cures)."""
    fp = Footprint(label="start", bytes=64 * GiB, how="test")
    assert gate(_device(free_bytes=139 * GiB), fp, []).decision == "start"
    waiting = gate(_device(free_bytes=20 * GiB), fp, [])
    assert waiting.decision == "wait" and "not yet released" in waiting.reason
    other = Footprint(label="long", bytes=80 * GiB, how="test")
    assert gate(_device(), fp, [other]).decision == "refuse"
    assert gate(_device(limit_bytes=60 * GiB), fp, []).decision == "refuse"
    broken = Footprint(label="start", bytes=GiB, how="test", problem="weights need more than the budget")
    assert gate(_device(), broken, []).decision == "refuse"
    host = Device(kind="host", name="host RAM", gpu=H200, total_bytes=24 * GiB, free_bytes=GiB, source="test")
    assert gate(host, fp.model_copy(update={"bytes": 2 * GiB}), []).decision == "start"  # RAM is back once reaped
    growing = Footprint(label="start", bytes=GiB, peak_bytes=30 * GiB, how="prompt cache up to --cache-ram")
    assert gate(host, growing, []).decision == "refuse"


def test_green_must_fit_alone_as_it_grows_and_beside_blue_as_it_starts() -> None:
    """llama.cpp's prompt cache fills with use up to --cache-ram: green starts small beside blue, but must fit as
    it grows once blue is gone."""
    host = Device(kind="host", name="host RAM", gpu=H200, total_bytes=24 * GiB, free_bytes=20 * GiB, source="test")
    blue = Footprint(label="blue", bytes=GiB, how="PSS")
    small = Footprint(label="green", bytes=GiB, peak_bytes=9 * GiB, how="llama.cpp")
    assert _plan(blue, small, device=host).decision == "side_by_side"
    huge = small.model_copy(update={"peak_bytes": 30 * GiB})
    refused = _plan(blue, huge, device=host, max_unavailable_s=3600)
    assert refused.decision == "refuse" and "even with blue" in refused.reason and "--cache-ram" in refused.fixes[0]


def test_llamacpp_is_planned_from_its_gguf_shapes_and_its_prompt_cache_bound(tiny_model) -> None:
    """llama.cpp states no KV size: 4 layers x 2 KV heads x 64 dims x (K + V) x 2 bytes = 2,048 bytes per token of
    the tiny model's GGUF (its PSS grew by that between 8K and 64K contexts); its prompt cache fills up to
    --cache-ram (8192 MiB by default)."""
    from servetune.model.gguf_shape import kv_bytes_per_token
    from servetune.operate.capacity import LLAMACPP_RUNTIME_BYTES, llamacpp_bytes

    assert kv_bytes_per_token(tiny_model.gguf_path) == 2048
    assert kv_bytes_per_token(tiny_model.gguf_path, "q8_0", "q8_0") == 1088
    assert kv_bytes_per_token(tiny_model.hf_dir / "config.json") is None
    cfg = EngineConfig(engine="llamacpp", model=str(tiny_model.gguf_path), flags={"ctx-size": 32768, "cache-ram": 0})
    planned = llamacpp_bytes(cfg)
    assert isinstance(planned, tuple)
    start, peak, how, n_ctx = planned
    assert start == peak == tiny_model.gguf_path.stat().st_size + 32768 * 2048 + LLAMACPP_RUNTIME_BYTES
    assert n_ctx == 32768 and "2,048 B" in how
    default = llamacpp_bytes(cfg.with_flags(cache_ram=None))
    assert isinstance(default, tuple) and default[1] - default[0] == 8192 * 1024**2
    assert "without a bound" in str(llamacpp_bytes(cfg.with_flags(cache_ram=-1)))
    assert "no --ctx-size" in str(llamacpp_bytes(cfg.with_flags(ctx_size=None)))
