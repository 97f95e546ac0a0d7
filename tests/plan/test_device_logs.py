"""Real vLLM 0.24.0 starts on the H200 device (benchmarks/device/*.log, Qwen3.6-27B shape, dummy weights):
the planner reproduces their capacity lines exactly from their "Available KV cache memory" line."""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.hardware.catalog import get_gpu
from servetune.plan.api import plan_for
from servetune.plan.calibrate import available_bytes, flags_from_log, read_startup_log

DEVICE = Path(__file__).parents[2] / "benchmarks" / "device"
LOGS = sorted(p for p in DEVICE.rglob("*.log") if "Available KV cache memory" in p.read_text(errors="replace")) \
    if DEVICE.exists() else []


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_device_log_capacity_lines_reproduced(log: Path) -> None:
    text = log.read_text(errors="replace")
    figures = read_startup_log(text)
    cfg = EngineConfig(model="qwen3.6-27b", flags=flags_from_log(text))
    plan = plan_for(cfg, get_gpu("H200"), vllm_version=figures.version or "0.24.0",
                    available_kv_bytes=available_bytes(figures))
    if figures.block_size is not None:
        assert plan.block_size == figures.block_size
    assert plan.log_lines == figures.log_lines[-len(plan.log_lines):]
