"""vLLM flags (EngineConfig.flags) as typed planner inputs.

The engine vocabulary (`servetune.engines.vocab`) has read every spelling and value the way vLLM's own parser does
(`128k` = 128,000 and `128K` = 131,072, `-1`/`auto` for an auto-fitted max_model_len, JSON for
`speculative-config`) by the time flags reach here (an `EngineConfig` holds them so); this module picks the flags
the ledger needs and checks the ranges vLLM enforces.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError

FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")


class PlanInputs(BaseModel):
    """The flags that shape vLLM's ledger, resolved to values (None = vLLM's default applies)."""

    model_config = ConfigDict(frozen=True)

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    """Independent replicas; each holds its own KV pool (capacity figures are per replica)."""
    max_model_len: int | None = None
    """None = the model's max_position_embeddings; -1 = auto-fit to memory."""
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str | None = None
    quantization: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    block_size: int | None = None
    num_speculative_tokens: int = 0
    speculative_method: str | None = None
    language_model_only: bool | None = None
    enforce_eager: bool = False
    num_gpu_blocks_override: int | None = None
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    attention_backend: str | None = None
    max_cudagraph_capture_size: int | None = None

    @property
    def kv_fp8(self) -> bool:
        """True for the FP8 KV-cache formats (one byte per element)."""
        return self.kv_cache_dtype in FP8_KV


def _number(value: Any, flag: str, kind: type = int) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError) as err:
        raise ServetuneError(f"--{flag} needs a number, got {value!r}", f"e.g. --{flag} 2") from err


def _speculative(value: Any) -> tuple[str | None, int]:
    if value is None:
        return None, 0
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ServetuneError(
                f"--speculative-config is not JSON: {value!r}",
                """write it like '{"method": "mtp", "num_speculative_tokens": 2}'""",
            ) from err
    if not isinstance(value, dict):
        raise ServetuneError(
            "--speculative-config must be a JSON object", """e.g. '{"method": "mtp", "num_speculative_tokens": 2}'"""
        )
    method = value.get("method")
    tokens = value.get("num_speculative_tokens")
    if tokens is None:
        raise ServetuneError(
            "--speculative-config has no num_speculative_tokens", 'add it, e.g. "num_speculative_tokens": 2'
        )
    if isinstance(tokens, float) and not tokens.is_integer():
        raise ServetuneError(f"--speculative-config: num_speculative_tokens {tokens!r} is not a whole number", "e.g. 2")
    count = _number(tokens, "speculative-config num_speculative_tokens")
    if not 0 <= count <= MAX_SPEC_TOKENS:
        raise ServetuneError(
            f"--speculative-config: num_speculative_tokens {tokens!r} is not 0 to {MAX_SPEC_TOKENS}",
            'draft a few tokens per step, e.g. "num_speculative_tokens": 2',
        )
    return (str(method) if method else None), count


MAX_SPEC_TOKENS = 64
"""Draft tokens per step (vLLM's drafters propose a handful; 64 is far beyond any that pays)."""
MAX_PARALLEL = 4096
"""A parallel size (tensor, pipeline or data): no deployment has more GPUs in one dimension."""
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256, 512)
"""The KV block sizes a user may ask vLLM for (its own choices; hybrid models pick larger ones themselves)."""


def _positive(out: dict[str, Any], field: str, flag: str) -> None:
    value = out.get(field)
    if value is not None and value < 1:
        raise ServetuneError(f"--{flag} must be at least 1, got {value}", f"give --{flag} a positive whole number")


def inputs_from_flags(flags: Mapping[str, Any]) -> PlanInputs:
    """PlanInputs from vLLM flags as an `EngineConfig` holds them (canonical names, typed values), checked against
    the ranges vLLM enforces; flags the planner does not model are ignored here (they pass through to the command
    line)."""
    f = {k: v for k, v in flags.items() if v is not None}
    out: dict[str, Any] = {}
    names = {
        "tensor-parallel-size": "tensor_parallel_size",
        "pipeline-parallel-size": "pipeline_parallel_size",
        "data-parallel-size": "data_parallel_size",
        "max-model-len": "max_model_len",
        "gpu-memory-utilization": "gpu_memory_utilization",
        "kv-cache-memory-bytes": "kv_cache_memory_bytes",
        "kv-cache-dtype": "kv_cache_dtype",
        "dtype": "dtype",
        "quantization": "quantization",
        "max-num-seqs": "max_num_seqs",
        "max-num-batched-tokens": "max_num_batched_tokens",
        "enable-prefix-caching": "enable_prefix_caching",
        "enable-chunked-prefill": "enable_chunked_prefill",
        "block-size": "block_size",
        "language-model-only": "language_model_only",
        "enforce-eager": "enforce_eager",
        "num-gpu-blocks-override": "num_gpu_blocks_override",
        "mamba-cache-dtype": "mamba_cache_dtype",
        "mamba-ssm-cache-dtype": "mamba_ssm_cache_dtype",
        "attention-backend": "attention_backend",
        "max-cudagraph-capture-size": "max_cudagraph_capture_size",
    }
    for flag, field in names.items():
        if flag in f:
            out[field] = f[flag]
    for field, flag in (
        ("tensor_parallel_size", "tensor-parallel-size"),
        ("pipeline_parallel_size", "pipeline-parallel-size"),
        ("data_parallel_size", "data-parallel-size"),
        ("max_num_seqs", "max-num-seqs"),
        ("max_num_batched_tokens", "max-num-batched-tokens"),
        ("kv_cache_memory_bytes", "kv-cache-memory-bytes"),
        ("num_gpu_blocks_override", "num-gpu-blocks-override"),
        ("max_cudagraph_capture_size", "max-cudagraph-capture-size"),
    ):
        _positive(out, field, flag)
        if field.endswith("parallel_size") and out.get(field, 1) > MAX_PARALLEL:
            raise ServetuneError(
                f"--{flag} {out[field]} is more than {MAX_PARALLEL}", f"give --{flag} the GPUs per replica, e.g. 2"
            )
    if out.get("max_model_len") is not None and out["max_model_len"] != -1 and out["max_model_len"] < 1:
        raise ServetuneError(
            f"--max-model-len must be positive (or auto / -1), got {out['max_model_len']}", "e.g. --max-model-len 32K"
        )
    util = out.get("gpu_memory_utilization")
    if util is not None and not 0 < util <= 1:
        raise ServetuneError(
            f"--gpu-memory-utilization must be in (0, 1], got {util}", "a fraction of the GPU's memory, e.g. 0.9"
        )
    if out.get("block_size") is not None and out["block_size"] not in BLOCK_SIZES:
        raise ServetuneError(
            f"--block-size {out['block_size']} is not a block size vLLM takes",
            f"use one of {', '.join(map(str, BLOCK_SIZES))} (or leave it out: vLLM picks it)",
        )
    limits = f.get("limit-mm-per-prompt")
    if isinstance(limits, dict) and limits and all(v == 0 for v in limits.values() if not isinstance(v, dict)):
        out.setdefault("language_model_only", True)
    method, tokens = _speculative(f.get("speculative-config"))
    if method or tokens:
        out["speculative_method"], out["num_speculative_tokens"] = method, tokens
    if out.get("kv_cache_dtype") not in (None, "auto", "bfloat16", "float16", "half", *FP8_KV):
        raise ServetuneError(
            f"--kv-cache-dtype {out['kv_cache_dtype']!r} is not modelled",
            "use auto, fp8, fp8_e4m3 or fp8_e5m2",
        )
    return PlanInputs(**out)
