"""The 2026-12 device campaign's startups (vLLM 0.24.0 on an H200, four model families) against the planner.

The per-family overhead was fitted on the fit startups (benchmarks/device_campaign/planner_fit.py); the held-out
ones (H2 hybrid, D2 dense; fixed in split.json before the run) must stay within 1% of vLLM's "GPU KV cache size",
and every start within the planner's stated range. Qwen3-32B ran vLLM's V2 model runner, which reserves no CUDA
graph memory before sizing the KV cache.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.vocab import parse_argv
from servetune.hardware.catalog import GiB, get_gpu
from servetune.plan.api import plan_for

CAMPAIGN = Path(__file__).parents[2] / "benchmarks" / "device_campaign"
MANIFEST = json.loads((CAMPAIGN / "data" / "manifest.json").read_text())
FLAGS = {s["id"]: s for s in MANIFEST["plan"]["startups"]}
with (CAMPAIGN / "startups.csv").open() as f:
    STARTS = {r["startup"]: r for r in csv.DictReader(f) if r["kv_tokens"]}


def plan(sid: str, version: str = "0.24.0", env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    s = FLAGS[sid]
    model = str(CAMPAIGN / "models" / s["model"] / "config.json")
    return plan_for(EngineConfig(model=model, flags=parse_argv("vllm", s["flags"]), env=env or {}), get_gpu("H200"),
                    vllm_version=version)  # fmt: skip


@pytest.mark.parametrize("sid", sorted(STARTS))
def test_every_start_within_the_stated_range_and_held_out_within_1_percent(sid: str) -> None:
    p, logged = plan(sid), STARTS[sid]
    tokens = int(logged["kv_tokens"])
    error = abs(p.kv_cache_tokens - tokens) / tokens
    assert error < (0.01 if sid in ("H2", "D2") else 0.005), (sid, p.kv_cache_tokens, tokens)
    available = float(logged["available_kv_gib"])
    assert p.available_kv_low_bytes / GiB - 0.005 <= available <= p.available_kv_high_bytes / GiB + 0.005


def test_v2_model_runner_reserves_no_graph_memory_in_024_only() -> None:
    dense, moe = plan("D1"), plan("M1")
    assert dense.overhead.cudagraph_bytes == 0 and any("V2 model runner" in n for n in dense.notes)
    assert moe.overhead.cudagraph_bytes > 0 and not any("V2 model runner" in n for n in moe.notes)
    assert plan("D1", version="0.33.0").overhead.cudagraph_bytes > 0  # 0.29+: V2 everywhere, graphs profiled
    forced = plan("D1", env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert forced.overhead.cudagraph_bytes > 0 and forced.kv_cache_tokens < dense.kv_cache_tokens


def test_an_impossible_length_or_budget_is_decided_before_any_speed() -> None:
    for flags in ({"max-model-len": 999_999_999_999}, {"max-num-batched-tokens": 1}):
        t = time.perf_counter()
        p = plan_for(EngineConfig(model="qwen3.6-27b", flags=flags), get_gpu("H200"))
        assert time.perf_counter() - t < 5
        assert p.feasible == ("max-model-len" not in flags)
        assert (p.speeds == []) == (not p.feasible)
