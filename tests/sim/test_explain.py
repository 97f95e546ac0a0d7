"""`estimate --explain`: the predicted TTFT of a class split into parts that add up to it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from servetune.errors import ServetuneError
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import build_deployment
from servetune.sim.explain import PARTS, explain_ttft
from servetune.sim.flags import parse_sim_args
from servetune.sim.virtual import RunTrace

ROOT = Path(__file__).resolve().parents[2]
ARGV = ["qwen3.6-27b", "--max-model-len", "16384", "--language-model-only", "--gpu", "H200", "--vllm-version", "0.24.0"]


def explained(workload: Workload, shape: LoadShape, cls: str | None = None):  # type: ignore[no-untyped-def]
    backend = SimBackend(build_deployment(parse_sim_args(ARGV)))
    backend.trace = RunTrace()
    result = asyncio.run(backend.run(workload, shape))
    return explain_ttft(backend.trace, result.records, cls), result


def test_parts_add_up_to_the_mean_ttft() -> None:
    b, result = explained(Workload.synthetic(2048, 32), LoadShape.closed(8, requests=40))
    assert sum(getattr(b, key) for key, _ in PARTS) == pytest.approx(b.ttft_mean_ms, rel=1e-6)
    assert b.ttft_p50_ms == pytest.approx(result.summary.ttft_ms.p50, rel=1e-6)
    assert b.requests == 40 and b.prompt_tokens >= 2048  # the chat template adds its markers
    assert b.mixed_steps > 0 and b.mixed_decodes > 0  # a closed loop at 8: prompts join running decodes


def test_a_burst_waits_in_the_api_server_and_the_queue() -> None:
    b, _ = explained(Workload.synthetic(4096, 16), LoadShape.open(float("inf"), requests=32))
    assert b.api_ms > 30  # 32 requests parsed one at a time
    assert b.queue_ms > b.prefill_ms + b.mixed_ms  # most wait for the budget to free up
    with pytest.raises(ServetuneError, match="no measured request of class 'nope'"):
        explained(Workload.synthetic(64, 4), LoadShape.closed(1, requests=2), "nope")


def test_estimate_explain_prints_the_breakdown() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "servetune", "estimate", *ARGV, "--requests", "20", "--input-tokens", "1024",
         "--output-tokens", "16", "--concurrency", "4", "--explain"],
        capture_output=True, text=True, check=False, timeout=120, env={"PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "explain: TTFT of class 'default'" in out.stdout and "mixed steps" in out.stdout
