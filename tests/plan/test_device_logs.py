"""Real vLLM 0.24.0 starts on the H200 device (Qwen3.6-27B shape, dummy weights; startup logs copied from
benchmarks/device into tests/plan/logs/h200-*.log, the measured speeds read from benchmarks/device).

Exact: from each log's "Available KV cache memory" the planner reproduces the block size and both capacity
lines, and "Model loading took" to the printed 0.01 GiB. Modelled: the overhead model (whose defaults were
fitted to these same starts, so this is in-sample) lands within 0.25 GiB of the logged available memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.vllm import parse_vllm_log
from servetune.hardware.catalog import GiB, get_gpu
from servetune.plan.api import plan_for
from servetune.plan.calibrate import ledger_flags

DEVICE = Path(__file__).parents[2] / "benchmarks" / "device"
LOGS = sorted((Path(__file__).parent / "logs").glob("h200-*.log"))


def _plans(log: Path):  # type: ignore[no-untyped-def]
    text = log.read_text(errors="replace")
    figures = parse_vllm_log(text)
    cfg = EngineConfig(model="qwen3.6-27b", flags=ledger_flags(figures))
    version = figures.version or "0.24.0"
    exact = plan_for(cfg, get_gpu("H200"), vllm_version=version, available_kv_bytes=figures.available_kv_bytes)
    modelled = plan_for(cfg, get_gpu("H200"), vllm_version=version, with_fixes=False)
    return figures, exact, modelled


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_device_log_reproduced(log: Path) -> None:
    figures, exact, modelled = _plans(log)
    if figures.block_size is not None:
        assert exact.block_size == figures.block_size
    assert exact.log_lines == (figures.capacity_lines or [])[-len(exact.log_lines) :]
    assert f"{exact.weights_bytes_per_gpu / GiB:.2f}" == f"{figures.weights_gib:.2f}"
    logged = figures.available_kv_gib
    assert logged is not None
    assert abs(modelled.available_kv_bytes / GiB - logged) < 0.25
    assert modelled.available_kv_low_bytes / GiB <= logged <= modelled.available_kv_high_bytes / GiB


def test_device_runs_named() -> None:
    """The three starts by name, so that a missing log fails loudly instead of leaving no parameters."""
    expected = {
        "h200-v0240-A-defaults.log": ("GPU KV cache size: 1,178,881 tokens", "8.99x"),
        "h200-v0240-B-mnbt2048-seqs32.log": ("GPU KV cache size: 1,208,775 tokens", "9.22x"),
        "h200-v0240-C-fp8kv-mtp2.log": ("GPU KV cache size: 1,914,227 tokens", "14.60x"),
    }
    for name, (tokens, concurrency) in expected.items():
        _, exact, _ = _plans(Path(__file__).parent / "logs" / name)
        assert exact.log_lines[0] == tokens and exact.log_lines[1].endswith(concurrency)


def _summary(name: str) -> dict:
    import json

    return json.loads((DEVICE / "A" / f"{name}.summary.json").read_text())


@pytest.mark.skipif(not (DEVICE / "A").exists(), reason="benchmarks/device/A (H200 measurements) not present")
def test_roofline_defaults_against_the_h200_runs() -> None:
    """Setting A (vLLM defaults). The decode figures were not fitted (bandwidth 0.72, 0.5 ms per step are the
    BLIS priors); the prefill MFU (0.6) was set from these two prefill points."""
    from servetune.model.hf_config import load_model_spec
    from servetune.plan.roofline import decode_step_time, model_costs, prefill_time

    costs = model_costs(load_model_spec("qwen3.6-27b", language_model_only=True), tp=1)
    gpu = get_gpu("H200")
    tpot = _summary("decode_1x1024_512")["tpot_ms_p50"] / 1000
    assert abs(decode_step_time(costs, gpu, batch=1, context=1024 + 256).seconds / tpot - 1) < 0.05
    for name, tokens in (("prefill_8k", 8192), ("prefill_32k", 32768)):
        ttft = _summary(name)["ttft_ms_p50"] / 1000
        assert abs(prefill_time(costs, gpu, tokens=tokens, chunk=8192) / ttft - 1) < 0.05
    for concurrency in (8, 16, 32):  # ITL p50 = plain decode steps of a full batch
        itl = _summary(f"curve_c{concurrency}")["itl_ms_p50"] / 1000
        assert abs(decode_step_time(costs, gpu, batch=concurrency, context=1024 + 128).seconds / itl - 1) < 0.05
