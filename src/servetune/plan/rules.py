"""Hardware and parallelism rules users trip on, as (blocking problems, notes) before any arithmetic.

A blocking problem makes vLLM refuse to start; a note changes what vLLM does (a dtype fallback, a different
attention backend) without failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servetune.hardware.catalog import GPUSpec
from servetune.model.spec import ModelSpec
from servetune.plan.inputs import PlanInputs
from servetune.plan.placement import Placement


@dataclass
class RuleReport:
    """What the rules found: problems block the launch, notes explain vLLM's choices, extra flags fix them."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    serve_dtype: str = "bfloat16"
    extra_flags: dict[str, str] = field(default_factory=dict)


def divisors_ok(spec: ModelSpec, tp: int) -> list[str]:
    """Why `tp` cannot shard this model (empty if it can)."""
    why = []
    heads = spec.num_attention_heads
    if heads % tp:
        why.append(f"{heads} attention heads are not divisible by tensor-parallel-size {tp}")
    if spec.attention and spec.attention.num_kv_heads > tp and spec.attention.num_kv_heads % tp:
        why.append(f"{spec.attention.num_kv_heads} KV heads are not divisible by tensor-parallel-size {tp}")
    lin = spec.linear_attention
    if lin and (lin.num_v_heads % tp or lin.num_k_heads % tp):
        why.append(f"Gated-DeltaNet heads ({lin.num_k_heads} key / {lin.num_v_heads} value) are not divisible by {tp}")
    if spec.moe and spec.moe.expert_intermediate % tp:
        why.append(f"expert width {spec.moe.expert_intermediate} is not divisible by {tp}")
    return why


def valid_tp_sizes(spec: ModelSpec, limit: int = 8) -> list[int]:
    """Tensor-parallel sizes (powers of two up to `limit`) that shard this model."""
    return [t for t in (1, 2, 4, 8, 16) if t <= limit and not divisors_ok(spec, t)]


def batch_budget(max_num_batched_tokens: int, max_num_seqs: int) -> str | None:
    """vLLM's `SchedulerConfig` check on the values it runs with (a default included: `--max-num-seqs 10000` alone
    meets the GPU's default budget of 8192 and vLLM refuses to start): every scheduled sequence needs a token of
    the step's budget."""
    if max_num_batched_tokens >= max_num_seqs:
        return None
    return (
        f"max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal to max_num_seqs "
        f"({max_num_seqs}): give --max-num-batched-tokens {max_num_seqs} or more, or --max-num-seqs "
        f"{max_num_batched_tokens} or less"
    )


def check(spec: ModelSpec, gpu: GPUSpec, num_gpus: int, inputs: PlanInputs) -> RuleReport:
    """Applies the rules for this model, GPU and flags."""
    r = RuleReport(serve_dtype=spec.dtype)
    tp, pp, dp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size, inputs.data_parallel_size
    if min(tp, pp, dp) < 1:
        r.problems.append("tensor-, pipeline- and data-parallel sizes must be at least 1")
        return r
    placed = Placement(
        gpu=gpu, gpus=num_gpus, tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=dp
    )
    if placed.problem:
        r.problems.append(placed.problem)
    r.notes.extend(placed.notes)
    for why in divisors_ok(spec, tp):
        r.problems.append(f"{why}; valid sizes: {', '.join(map(str, valid_tp_sizes(spec)))}")
    if pp > spec.num_layers:
        r.problems.append(f"pipeline-parallel-size {pp} exceeds the {spec.num_layers} layers")
    if spec.dtype == "bfloat16" and not gpu.supports_bf16:
        if inputs.dtype in ("bfloat16", "bf16"):
            r.problems.append(
                f"{gpu.name} (compute capability {gpu.compute_capability}) has no BF16; vLLM refuses --dtype bfloat16"
            )
        else:
            r.notes.append(f"{gpu.name} has no BF16: vLLM falls back to float16 (pass --dtype float16 to say so)")
        r.serve_dtype = "float16"
        r.extra_flags["dtype"] = "float16"
    if not gpu.supports_flash_attention:
        r.notes.append(
            f"FlashAttention needs compute capability 8.0 ({gpu.name}: {gpu.compute_capability}); vLLM uses TRITON_ATTN"
        )
    if inputs.kv_fp8 and not gpu.flash_attention_fp8_kv:
        backend = (inputs.attention_backend or "").upper()
        if backend == "FLASH_ATTN":
            r.problems.append(f"FlashAttention reads FP8 KV only on Hopper/Blackwell, not on {gpu.name}")
        else:
            r.notes.append(f"FP8 KV on {gpu.name} needs a non-FlashAttention backend: TRITON_ATTN (or FLASHINFER)")
            if gpu.supports_flash_attention and not backend:
                r.extra_flags["attention-backend"] = "TRITON_ATTN"
    q = spec.quant
    if q.method != "none" and gpu.compute_capability < q.min_compute_capability:
        hint = " (GPTQ kernels run on Volta: use a GPTQ int4 checkpoint)" if q.method == "awq" else ""
        r.problems.append(
            f"{q.method} weights need compute capability {q.min_compute_capability} in vLLM; "
            f"{gpu.name} has {gpu.compute_capability}{hint}"
        )
    if q.method == "fp8" and gpu.compute_capability < 8.9:
        r.notes.append(f"{gpu.name} has no FP8 tensor cores: vLLM runs FP8 weights as W8A16 (Marlin)")
    if gpu.compute_capability < 8.0:
        r.notes.append(
            "recent vLLM wheels (torch >= 2.11) no longer ship Volta kernels: a V100 needs an older "
            "vLLM or a custom build"
        )
    util = inputs.gpu_memory_utilization
    if util is not None and not 0 < util <= 1:
        r.problems.append(
            f"gpu-memory-utilization must be in (0, 1], got {util} (a fraction of the GPU's total memory)"
        )
    if inputs.speculative_method in ("mtp", "qwen3_next_mtp", "qwen3_5_mtp", "deepseek_mtp") and not spec.mtp_layers:
        r.problems.append(
            f"speculative method {inputs.speculative_method!r} needs MTP layers, and {spec.name} has none"
        )
    return r
