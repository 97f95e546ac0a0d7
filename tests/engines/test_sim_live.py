"""servetune's simulated vLLM, launched and parsed through the same adapter path as vLLM."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.launch import launch
from servetune.suite.check import check_server, passed

pytestmark = pytest.mark.engine


def test_sim_serve_launches_checks_and_stops(tiny_model, tmp_path: Path) -> None:
    cfg = EngineConfig(
        engine="sim",
        model=str(tiny_model.hf_dir),
        served_model_name="sim-tiny",
        flags={"max-model-len": 4096, "gpu": "H200", "time-scale": 100},
    )
    with launch(cfg, log_dir=tmp_path, startup_timeout_s=120) as engine:
        facts = engine.facts
        assert facts.engine == "sim" and facts.max_model_len == 4096
        assert facts.kv_cache_tokens and facts.available_kv_gib  # the simulator's vLLM-shaped capacity lines
        report = asyncio.run(check_server(engine.base_url, engine.model_name, long_context_tokens=1000))
        assert passed(report), report.notes
    assert engine.teardown is not None and engine.teardown.clean
