"""The five seed systems (field reports in ../shared/seeds) as plannable configs, for `servetune demo` and
examples/plans. Each uses a bundled model config, so no download is needed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LMO: dict[str, Any] = {"language-model-only": True}


@dataclass(frozen=True)
class SeedSystem:
    """One deployment from a field report."""

    key: str
    title: str
    model: str
    gpu: str
    flags: dict[str, Any] = field(default_factory=dict)
    vllm_version: str | None = None


def _mtp(k: int) -> dict[str, Any]:
    return {"speculative-config": {"method": "mtp", "num_speculative_tokens": k}}


SEEDS: tuple[SeedSystem, ...] = (
    SeedSystem(
        "000-2xa100-pcie-bf16",
        "seed 000: 2x A100-80GB PCIe, Qwen3.6-27B BF16, TP2, 128K",
        "qwen3.6-27b",
        "A100-80G-PCIex2",
        {"tensor-parallel-size": 2, "max-model-len": "128K", **LMO},
    ),
    SeedSystem(
        "001-2xa100-sxm-bf16kv-mtp2",
        "seed 001: 2x A100-80GB SXM, BF16 KV + prefix caching + MTP 2 (vLLM 0.19.1)",
        "qwen3.6-27b",
        "A100-80G-SXMx2",
        {"tensor-parallel-size": 2, "max-model-len": "128K", "enable-prefix-caching": True, **_mtp(2), **LMO},
        "0.19.1",
    ),
    SeedSystem(
        "001-2xa100-sxm-fp8kv-mtp2",
        "seed 001: 2x A100-80GB SXM, FP8 KV + prefix caching + MTP 2 (vLLM 0.19.1)",
        "qwen3.6-27b",
        "A100-80G-SXMx2",
        {
            "tensor-parallel-size": 2,
            "max-model-len": "128K",
            "kv-cache-dtype": "fp8",
            "enable-prefix-caching": True,
            **_mtp(2),
            **LMO,
        },
        "0.19.1",
    ),
    SeedSystem(
        "001-2xa100-sxm-bf16kv-mtp4",
        "seed 001: 2x A100-80GB SXM, BF16 KV + prefix caching + MTP 4 (vLLM 0.19.1)",
        "qwen3.6-27b",
        "A100-80G-SXMx2",
        {"tensor-parallel-size": 2, "max-model-len": "128K", "enable-prefix-caching": True, **_mtp(4), **LMO},
        "0.19.1",
    ),
    SeedSystem(
        "001-2xa100-sxm-fp8kv-mtp4",
        "seed 001: 2x A100-80GB SXM, FP8 KV + prefix caching + MTP 4 (vLLM 0.19.1)",
        "qwen3.6-27b",
        "A100-80G-SXMx2",
        {
            "tensor-parallel-size": 2,
            "max-model-len": "128K",
            "kv-cache-dtype": "fp8",
            "enable-prefix-caching": True,
            **_mtp(4),
            **LMO,
        },
        "0.19.1",
    ),
    SeedSystem(
        "002-1xa100-int4",
        "seed 002: 1x A100-80GB, Qwen3.6-27B INT4 (AWQ g128), 128K, max-num-seqs 256",
        "qwen3.6-27b",
        "A100-80G-SXM",
        {"max-model-len": "128K", "quantization": "awq", "max-num-seqs": 256, **LMO},
    ),
    SeedSystem(
        "003-1xv100-bf16",
        "seed 003: 1x V100-32GB, Qwen3.6-27B BF16, 32K (does not fit: see fixes)",
        "qwen3.6-27b",
        "V100-32G",
        {"max-model-len": 32768, **LMO},
    ),
    SeedSystem(
        "003-1xv100-int4",
        "seed 003: 1x V100-32GB, Qwen3.6-27B GPTQ INT4 in FP16, 32K",
        "qwen3.6-27b",
        "V100-32G",
        {"max-model-len": 32768, "quantization": "gptq", "dtype": "float16", **LMO},
    ),
    SeedSystem(
        "004-a10g-qwen2-7b", "seed 004: A10G (24 GB), Qwen2-7B BF16, 32K", "qwen2-7b", "A10G", {"max-model-len": 32768}
    ),
)
