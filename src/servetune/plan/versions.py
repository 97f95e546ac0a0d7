"""What changes in vLLM's (v1) memory ledger between releases 0.11 and 0.33.

Verified from the wheels' source (0.11.0, 0.20.2, 0.24.0, 0.26.0, 0.33.0); a switch point between two read
releases is placed at the later verified one and marked as such in `notes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servetune.errors import ServetuneError

LATEST = "0.33.0"
OLDEST = (0, 11)
V2_ARCHITECTURES_0_24 = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen2MoeForCausalLM",
        "DeepseekV2ForCausalLM",
        "GraniteMoeForCausalLM",
    }
)
"""vLLM 0.23-0.28's `DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES` (0.23 added DeepseekV2 and Qwen2Moe, PR #42667): the
models it runs with the V2 model runner unless quantized. Taken from notes on 0.23/0.24's `vllm/config/vllm.py`
(not re-read here) and consistent with what 0.24.0 logged for Qwen3, Qwen3-MoE and Qwen3.5 on the H200."""


@dataclass(frozen=True)
class VllmBehaviour:
    """Version-dependent rules of the ledger."""

    version: str
    default_gpu_memory_utilization: float
    """0.9 up to 0.11; 0.92 from 0.20 (read in 0.20.2; the switch lies in 0.12-0.20)."""
    cudagraph_in_profile: bool
    """The CUDA-graph memory estimate is subtracted before the KV budget (0.20.2+; 0.11 captured after)."""
    hybrid_prefix_caching_supported: bool
    """0.11 turns prefix caching off for hybrids ("not yet supported"); 0.20.2 allows forcing it (experimental)."""
    hybrid_prefix_caching_default: bool
    """Hybrid (Mamba/GDN) models enable prefix caching by default: off in 0.24.0 (read), on in 0.26.0 (read)."""
    legacy_token_count: bool
    """<= 0.19: `GPU KV cache size` = num_blocks // num_groups * block_size (wrong for hybrids, fixed by
    vLLM PR #40694); later: int(max_concurrency * max_model_len)."""
    one_line_capacity_log: bool
    """0.33 prints tokens and concurrency on one line; 0.20-0.26 on two (0.27-0.32 unread: assumed one line)."""
    large_gpu_tier: bool
    """0.33 raises batch defaults again on >= 160 GiB GPUs (absent in 0.24.0)."""
    null_block_in_fit_check: bool
    """0.33 keeps one block (the null block) out of the admission check (absent in 0.24.0)."""
    v2_runner_architectures: frozenset[str] | None
    """Architectures vLLM runs with its V2 model runner ("Using V2 Model Runner") by default, unquantized; None:
    every model (0.29+, vLLM PR #53183 "Use MRV2 for all models by default"; read in 0.32.0's
    `VllmConfig.use_v2_model_runner`). 0.23-0.28: a list (`DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`); 0.24.0 ran
    Qwen3ForCausalLM with it and Qwen3MoeForCausalLM / Qwen3.5 (hybrid) with V1 (benchmarks/device_campaign)."""
    v2_profiles_cudagraphs: bool
    """The V2 runner estimates CUDA-graph memory before sizing the KV cache: not in 0.24.0 (no "Estimated CUDA
    graph memory" line; its graphs, 1.87 GiB for Qwen3-32B on an H200, are captured after the KV cache is
    allocated), yes in 0.32.0 (`gpu/cudagraph_utils.profile_cudagraph_memory`); assumed from 0.29 (unread)."""
    notes: tuple[str, ...] = ()


def parse_version(text: str | None) -> tuple[int, int, int]:
    """`0.24.0`, `v0.19.1`, `0.24` -> (0, 24, 0); None -> the latest modelled release."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", (text or LATEST).strip())
    if not m:
        raise ServetuneError(f"cannot read vLLM version {text!r}", "write it like 0.24.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def behaviour(version: str | None = None) -> VllmBehaviour:
    """The ledger rules of a vLLM version (latest modelled when None)."""
    v = parse_version(version)
    if v[:2] < OLDEST:
        raise ServetuneError(
            f"vLLM {version} predates the v1 engine ledger servetune models (0.11 to {LATEST})",
            "plan for 0.11 or later (--vllm-version 0.11.0), or upgrade vLLM",
        )
    minor = v[1] if v[0] == 0 else 99
    notes = []
    if 12 <= minor < 20:
        notes.append("gpu_memory_utilization default 0.9 vs 0.92 is unverified between 0.12 and 0.19")
    if 21 <= minor <= 25 and minor != 24:
        notes.append("hybrid prefix-caching default read in 0.24 (off) and 0.26 (on); this release assumed off")
    if 27 <= minor <= 32:
        notes.append("capacity log layout read in 0.26 (two lines) and 0.33 (one line); this release assumed one line")
    if 25 <= minor <= 31:
        notes.append(
            "vLLM's V2 model runner: architectures and CUDA-graph profiling read in 0.24 and 0.32; this release "
            "assumed like " + ("0.24" if minor < 29 else "0.32")
        )
    return VllmBehaviour(
        version=".".join(map(str, v)),
        default_gpu_memory_utilization=0.9 if minor < 20 else 0.92,
        cudagraph_in_profile=minor >= 20,
        hybrid_prefix_caching_supported=minor >= 12,
        hybrid_prefix_caching_default=minor >= 26,
        legacy_token_count=minor < 20,
        one_line_capacity_log=minor >= 27,
        large_gpu_tier=minor >= 33,
        null_block_in_fit_check=minor >= 33,
        v2_runner_architectures=None if minor >= 29 else V2_ARCHITECTURES_0_24 if minor >= 23 else frozenset(),
        v2_profiles_cudagraphs=minor >= 29,
        notes=tuple(notes),
    )
