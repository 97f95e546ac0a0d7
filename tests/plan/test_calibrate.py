"""Reading vLLM startup logs and checking/refitting the overhead model against them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from servetune.engines.config import EngineConfig
from servetune.engines.vllm import parse_vllm_log
from servetune.hardware.catalog import GiB, get_gpu
from servetune.plan.api import plan_for
from servetune.plan.calibrate import (
    check_overhead,
    fit_overhead,
)
from servetune.plan.memory import OverheadModel

LOGS = Path(__file__).parent / "logs"

TP2_LOG = """
(Worker_TP0 pid=1) INFO [gpu_model_runner.py:1] Model loading took 25.19 GiB memory and 30.0 seconds
(Worker_TP1 pid=2) INFO [gpu_model_runner.py:1] Model loading took 25.20 GiB memory and 30.1 seconds
(Worker_TP0 pid=1) INFO [interface.py:1] Setting attention block size to 784 tokens to ensure that attention page size is >= mamba page size.
(Worker_TP0 pid=1) INFO [gpu_worker.py:1] Available KV cache memory: 44.10 GiB
(Worker_TP1 pid=2) INFO [gpu_worker.py:1] Available KV cache memory: 44.02 GiB
(Worker_TP0 pid=1) INFO [gpu_worker.py:1] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9200 is equivalent to --gpu-memory-utilization=0.9140 without CUDA graph memory profiling.
(EngineCore pid=0) INFO [kv_cache_utils.py:1] GPU KV cache size: 1,384,960 tokens
(EngineCore pid=0) INFO [kv_cache_utils.py:1] Maximum concurrency for 131,072 tokens per request: 10.57x
"""


def test_the_one_log_parser_takes_the_smallest_rank() -> None:
    f = parse_vllm_log(TP2_LOG)
    assert f.available_kv_gib == 44.02 and f.weights_gib == 25.2 and f.block_size == 784
    assert f.kv_cache_tokens == 1_384_960 and f.max_concurrency == 10.57
    assert f.max_concurrency_tokens_per_request == 131072
    assert f.capacity_lines is not None and len(f.capacity_lines) == 2
    assert round(f.cudagraph_estimate_bytes(int(79.15 * GiB)) / GiB, 3) == round(0.006 * 79.15, 3)  # type: ignore[operator]


def test_check_and_fit_move_the_model_onto_the_log() -> None:
    cfg = EngineConfig(model="qwen3.6-27b", flags={"max-model-len": "128K", "language-model-only": True})
    gpu = get_gpu("A100-80G-SXM")
    plan = plan_for(cfg, gpu, 2, vllm_version="0.24.0", with_fixes=False)
    figures = parse_vllm_log(TP2_LOG)
    check = check_overhead(
        requested_bytes=plan.requested_bytes,
        weights_bytes=plan.weights_bytes_per_gpu,
        overhead=plan.overhead,
        available_model_bytes=plan.available_kv_bytes,
        uncertainty_bytes=plan.available_kv_high_bytes - plan.available_kv_bytes,
        figures=figures,
        total_bytes=gpu.memory_bytes,
    )
    assert abs(check.weights_model_gib - 25.20) < 0.01
    fitted = fit_overhead(OverheadModel(), check, plan.overhead, tp=2)
    refit = plan_for(cfg, gpu, 2, vllm_version="0.24.0", with_fixes=False, overhead_model=fitted)
    weights_error = check.weights_model_gib - 25.20  # not an overhead: the fit leaves it alone
    assert abs(refit.available_kv_bytes / GiB - (44.02 - weights_error)) < 0.01


def test_from_log_cli_reproduces_the_published_lines() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "servetune",
            "plan",
            "--model",
            "qwen3-14b",
            "--gpu",
            "H100",
            "--max-model-len",
            "32768",
            "--vllm-version",
            "0.11.0",
            "--from-log",
            str(LOGS / "lmcache-1739-qwen3-14b.log"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["lines_reproduced"] is True
    assert parse_vllm_log((LOGS / "lmcache-1739-qwen3-14b.log").read_text()).available_kv_bytes == round(6.51 * GiB)


def test_flags_from_the_non_default_args_line() -> None:
    from servetune.plan.calibrate import ledger_flags

    line = (
        "(APIServer pid=1) INFO 07-06 22:50:34 [api_utils.py:273] non-default args: {'model_tag': 'm', 'host': '0.0.0.0', "
        "'max_model_len': 131072, 'kv_cache_dtype': 'fp8', 'enable_prefix_caching': True, 'load_format': 'dummy', "
        "'language_model_only': True}"
    )
    assert ledger_flags(parse_vllm_log(line)) == {
        "max-model-len": 131072,
        "kv-cache-dtype": "fp8",
        "enable-prefix-caching": True,
        "language-model-only": True,
    }
    assert ledger_flags(parse_vllm_log("no such line")) == {}
