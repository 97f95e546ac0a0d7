"""vLLM's defaults that depend on the GPU (`EngineArgs.get_batch_defaults`, `vllm serve` context).

>= 70 GiB and not an A100: 8192 batched tokens / 1024 sequences (0.33 adds 16384 on >= 160 GiB);
otherwise 2048 / 256 ("Setting large max_num_batched_tokens for A100 reduces throughput", vLLM PR #17885).
"""

from __future__ import annotations

from servetune.hardware.catalog import GiB, GPUSpec
from servetune.plan.versions import VllmBehaviour


def batch_defaults(gpu: GPUSpec, behaviour: VllmBehaviour) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that `vllm serve` picks on this GPU."""
    if gpu.memory_bytes >= 70 * GiB and "a100" not in gpu.name.lower():
        if behaviour.large_gpu_tier and gpu.memory_bytes >= 160 * GiB:
            return 16384, 1024
        return 8192, 1024
    return 2048, 256
