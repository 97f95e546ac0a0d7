"""Every probe the registry marks simulable runs on SimBackend — the probe's own definition, not a copy — and
gives finite figures."""

from __future__ import annotations

import asyncio
import math

import pytest

from servetune.load.backend import ClientSpec
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import build_deployment
from servetune.sim.flags import parse_sim_args
from servetune.suite.registry import all_probes
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext

ARGV = ["qwen3.6-27b", "--max-model-len", "32768", "--language-model-only", "--gpu", "H200", "--enable-prefix-caching"]
SIMULABLE = [name for name, spec in all_probes().items() if spec.simulable]


@pytest.fixture(scope="module")
def backend() -> SimBackend:
    return SimBackend(build_deployment(parse_sim_args(ARGV)), client=ClientSpec(endpoint="chat"))


def test_the_registry_has_simulable_probes() -> None:
    assert {"acceptance", "short_latency", "decode_speed", "long_prefill", "prefix_reuse", "load_curve"} <= set(
        SIMULABLE
    )


@pytest.mark.parametrize("name", SIMULABLE)
def test_probe_runs_on_the_simulator(backend: SimBackend, name: str) -> None:
    spec = all_probes()[name]
    result = asyncio.run(run_probe(spec, ProbeContext(backend=backend, seed=7), spec.params()))
    assert result.ok and result.error is None, result
    assert result.figures and all(v is not None and math.isfinite(v) for v in result.figures.values()), result.figures
    assert all(math.isfinite(v) for point in result.points for v in point.values())
    assert result.engine_metrics.get("vllm:request_success_total", 0) >= 1  # scrape deltas around the probe
    if name == "acceptance":
        assert result.figures["passed"] == 1.0 and result.figures["max_model_len"] == 32768
    if name == "prefix_reuse":
        assert result.figures["hit_rate_pct"] > 50 and result.figures["ttft_drop_pct"] > 30
