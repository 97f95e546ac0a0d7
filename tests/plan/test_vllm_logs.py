"""The planner reproduces, exactly, capacity lines that real vLLM printed in published runs.

Input: the run's flags and the "Available KV cache memory" it logged (rounded GiB -> bytes) or, where the
issue shows no such line, the block count the run allocated. Output: block size, blocks, and the two lines.
"""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.hardware.catalog import get_gpu
from servetune.model.bundled import bundled_model
from servetune.plan.api import plan_for

GIB = 1024**3


def _plan(model: str, gpu: str, flags: dict, version: str, available: int):
    return plan_for(
        EngineConfig(model=str(bundled_model(model)), flags=flags),
        get_gpu(gpu),
        1,
        vllm_version=version,
        available_kv_bytes=available,
    )


def test_issue_40691_qwen35_27b_v0190() -> None:
    """vllm-project/vllm#40691: v0.19.0, H20, Qwen3.5-27B, --max-model-len 32768 --load-format dummy.

    Logged: `GPU KV cache size: 290,864 tokens` and `Maximum concurrency for 32,768 tokens per request: 33.04x`
    with 1487 blocks of 784 tokens (the old, hybrid-unaware token count num_blocks // 4 groups * 784).
    """
    flags = {"max-model-len": 32768}
    probe = _plan("qwen3.5-27b", "H200", flags, "0.19.0", available=0)
    available = 1487 * probe.layout.bytes_per_block + probe.layout.bytes_per_block // 2
    plan = _plan("qwen3.5-27b", "H200", flags, "0.19.0", available)
    assert plan.block_size == 784
    assert plan.num_blocks == 1487
    assert plan.blocks_per_request == 45  # cdiv(32768, 784) + 3 GDN groups x 1 state slot (prefix caching off)
    assert plan.log_lines == [
        "GPU KV cache size: 290,864 tokens",
        "Maximum concurrency for 32,768 tokens per request: 33.04x",
    ]


def test_issue_40696_qwen35_4b_block_528() -> None:
    """vllm-project/vllm#40696: v0.19.1, Qwen3.5-4B --enable-prefix-caching --max-model-len 1024:
    `Setting attention block size to 528 tokens to ensure that attention page size is >= mamba page size.`"""
    plan = _plan("qwen3.5-4b", "A100-80G", {"enable-prefix-caching": True, "max-model-len": 1024}, "0.19.1", 10 * GIB)
    assert plan.block_size == 528
    assert plan.layout.block_size_forced
    assert plan.layout.mamba_page_unpadded_bytes == 2_146_304


def test_lmcache_1739_qwen3_14b_dense() -> None:
    """LMCache/LMCache#1739 (vLLM v1, Oct 2025): Qwen3-14B, one GPU, --max-model-len 32768.

    Logged: `Available KV cache memory: 6.51 GiB`, `GPU KV cache size: 42,656 tokens`,
    `Maximum concurrency for 32,768 tokens per request: 1.30x`.
    """
    plan = _plan("qwen3-14b", "H100", {"max-model-len": 32768}, "0.11.0", round(6.51 * GIB))
    assert plan.block_size == 16
    assert plan.num_blocks == 2666
    assert plan.log_lines == [
        "GPU KV cache size: 42,656 tokens",
        "Maximum concurrency for 32,768 tokens per request: 1.30x",
    ]


def test_pr_13596_dense_block_count_lines() -> None:
    """vllm-project/vllm#13596 (the PR that introduced the line): 127,626 blocks at max_model_len 2048 print
    `GPU KV cache size: 2,042,016 tokens` and `Maximum concurrency for 2,048 tokens per request: 997.08x`."""
    plan = plan_for(
        EngineConfig(
            model=str(bundled_model("llama-3-8b")), flags={"max-model-len": 2048, "num-gpu-blocks-override": 127_626}
        ),
        get_gpu("H100"),
        vllm_version="0.11.0",
    )
    assert plan.log_lines == [
        "GPU KV cache size: 2,042,016 tokens",
        "Maximum concurrency for 2,048 tokens per request: 997.08x",
    ]


def test_new_token_count_for_hybrids_from_0_20() -> None:
    """From 0.20 (vLLM PR #40694) the token count is int(concurrency * max_model_len): 1487/45 * 32768."""
    flags = {"max-model-len": 32768}
    probe = _plan("qwen3.5-27b", "H200", flags, "0.24.0", available=0)
    plan = _plan("qwen3.5-27b", "H200", flags, "0.24.0", 1487 * probe.layout.bytes_per_block)
    assert plan.log_lines == [
        f"GPU KV cache size: {int(1487 / 45 * 32768):,} tokens",
        "Maximum concurrency for 32,768 tokens per request: 33.04x",
    ]
    off = {**flags, "enable-prefix-caching": False}
    latest = _plan("qwen3.5-27b", "H200", off, "0.33.0", 1487 * probe.layout.bytes_per_block)
    assert latest.log_lines == [
        f"GPU KV cache size: {int(1487 / 45 * 32768):,} tokens, Maximum concurrency for 32,768 tokens per request: 33.04x"
    ]
    # 0.26+ turns prefix caching on for hybrids: 'align' mode keeps 2 state slots per GDN group -> 42 + 6 blocks
    default = _plan("qwen3.5-27b", "H200", flags, "0.33.0", 1487 * probe.layout.bytes_per_block)
    assert default.prefix_caching and default.blocks_per_request == 48


def test_club3090_612_qwen36_35b_a3b_v0240() -> None:
    """noonghunna/club-3090#612: vLLM v0.24.0, RTX 5090, Qwen3.6-35B-A3B, --max-model-len 131072
    --kv-cache-dtype fp8 --enable-prefix-caching --max-num-seqs 1 --max-num-batched-tokens 8192.

    Logged: `Available KV cache memory: 5.98 GiB`, `GPU KV cache size: 567,978 tokens`,
    `Maximum concurrency for 131,072 tokens per request: 4.33x` (the 0.20+ token count: int(concurrency x len)).
    """
    from servetune.hardware.gpus import parse_gpu_arg

    gpu = parse_gpu_arg("custom:mem=31.4,bw=1792,tflops=209,cc=12.0").gpu
    flags = {
        "max-model-len": 131072,
        "kv-cache-dtype": "fp8",
        "enable-prefix-caching": True,
        "max-num-seqs": 1,
        "max-num-batched-tokens": 8192,
    }
    plan = plan_for(
        EngineConfig(model=str(bundled_model("qwen3.6-35b-a3b")), flags=flags),
        gpu,
        1,
        vllm_version="0.24.0",
        available_kv_bytes=round(5.98 * GIB),
    )
    assert plan.block_size == 2096  # 16 x cdiv(2,146,304 B GDN state, 16 x 1,024 B fp8 K+V per token)
    assert (plan.num_blocks, plan.blocks_per_request) == (299, 63 + 3 * 2)
    assert plan.log_lines == [
        "GPU KV cache size: 567,978 tokens",
        "Maximum concurrency for 131,072 tokens per request: 4.33x",
    ]
