"""The fixed-load probe: one operating point (a closed loop, or Poisson arrivals at a rate) against the real
llama.cpp server, its goodput counted per request by vLLM's rule with the probe's own bounds; on the simulator the
same probe runs for the tuner's estimates; its parameters take exactly one load."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from servetune.engines.config import EngineConfig
from servetune.load.backend import ClientSpec, LiveBackend
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import deployment_for_config
from servetune.suite.params import Probes
from servetune.suite.registry import get_probe
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext


def _run(backend: Any, seed: int, **params: Any) -> Any:
    """One run with its own seed: its own prompts (llama.cpp answers a prompt it saw from its cache)."""
    spec = get_probe("fixed_load")
    return asyncio.run(run_probe(spec, ProbeContext(backend, seed=seed), spec.params.model_validate(params)))


def test_poisson_arrivals_and_goodput_per_request_on_llamacpp(llama_server: Any, tiny_model: Any) -> None:
    backend = LiveBackend(
        llama_server.base_url,
        llama_server.model_name,
        client=ClientSpec(endpoint="completions", tokenizer=str(tiny_model.tokenizer_json)),
        engine="llamacpp",
        max_model_len=llama_server.facts.max_model_len,
    )
    common = {"rate": 6.0, "requests": 12, "input_tokens": 64, "output_tokens": 16, "spread": 0.25}
    loose = _run(backend, 1, **common, goodput={"ttft_ms": 60_000, "tpot_ms": 60_000})
    f = loose.figures
    assert loose.ok and loose.requests == 12 and loose.failed_requests == 0, loose
    assert f["goodput_rps"] == pytest.approx(f["request_rps"]), "every request meets a one-minute bound"
    # TPOT may be 0: the tiny model decodes 16 tokens in a few ms, and on a starved machine (CI under a CPU hog) the
    # client reads a whole answer after its first token at one instant — what the client saw, as vLLM's bench would.
    assert f["ttft_p99_ms"] >= f["ttft_p50_ms"] > 0 and f["tpot_p50_ms"] >= 0 and f["output_tok_s"] > 0
    impossible = _run(backend, 2, **common, goodput={"ttft_ms": 0.001})
    assert impossible.figures["goodput_rps"] == 0.0, "no first token comes within a microsecond"
    closed = _run(backend, 3, concurrency=2, requests=6, warmup_requests=2, input_tokens=64, output_tokens=16)
    assert closed.ok and closed.requests == 6, "the warm-up requests are not counted"
    assert "goodput_rps" not in closed.figures, "without goodput bounds there is no goodput figure"


def test_the_simulator_runs_the_same_probe() -> None:
    config = EngineConfig(engine="sim", model="qwen3.5-4b", flags={"max-model-len": 8192})
    backend = SimBackend(deployment_for_config(config, gpu="L40S"))
    result = _run(backend, 4, concurrency=8, requests=16, input_tokens=256, output_tokens=32)
    assert result.ok and result.figures["output_tok_s"] > 0 and result.figures["tpot_p50_ms"] > 0


def test_exactly_one_load_is_given() -> None:
    probes = Probes.model_validate({"fixed_load": {"rate": 4}, "short_latency": {}})
    assert probes.enabled() == ["short_latency", "fixed_load"]
    assert probes.params("fixed_load").model_dump()["concurrency"] is None  # type: ignore[union-attr]
    assert Probes.model_validate({"fixed_load": {}}).params("fixed_load").model_dump()["concurrency"] == 8  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="exactly one of concurrency"):
        Probes.model_validate({"fixed_load": {"rate": 4, "concurrency": 8}})
