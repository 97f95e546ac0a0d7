"""Roofline step-time model: bytes over bandwidth, FLOPs over peak, plus TP communication and a fixed overhead.

One engine step (vLLM v1 schedules prefill chunks and decodes together) costs
    t = max(bytes / (BW * bandwidth), prefill_flops / (peak * mfu_prefill) + decode_flops / (peak * mfu_decode))
        + all_reduces * (allreduce_latency_s + payload / link_BW) + step_overhead_s
bytes = weights streamed once (routed experts: only those the step's tokens touch) + KV read for every
context token + KV written for new tokens + Gated-DeltaNet state read and written per sequence; FLOPs =
2 x active parameters per token + the attention term (4 x heads x head_dim per (query, key) pair).
`ideal` sets every efficiency to 1 and drops the overheads: a ceiling no engine reaches. The defaults of
`Efficiency` start from the BLIS/inference-sim calibrations for A100/H100 (bandwidth 0.72, 0.5 ms per step,
15 us per all-reduce; decode MFU 0.3 for FLOP-light batches) with the prefill MFU set to 0.6 from real vLLM
0.24.0 runs of Qwen3.6-27B on an H200 (benchmarks/device: 8K and 32K prompts took 0.73 s and 3.27 s; these
defaults give 0.74 s and 3.2 s, and 15.4 ms per single-stream decode step against 15.3 ms measured).
`servetune sim` calibration fits them per GPU/model from measured runs and saves them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servetune.hardware.catalog import GPUSpec
from servetune.model.spec import ModelSpec
from servetune.plan.kvcache import gdn_state_bytes


class Efficiency(BaseModel):
    """Calibratable fractions of the roofline a real engine reaches."""

    model_config = ConfigDict(frozen=True)

    bandwidth: float = 0.72
    mfu_prefill: float = 0.6
    mfu_decode: float = 0.3
    step_overhead_s: float = 5e-4
    moe_layer_overhead_s: float = 5e-5
    """Fixed GPU time of each MoE layer per step (routing, token sorting, the grouped-GEMM launches): at a few
    tokens it is most of the layer. 50 us reproduces one-stream decode of Qwen3-30B-A3B and Qwen3.6-35B-A3B on an
    H200 with vLLM 0.24.0 (4.3 and 4.4 ms measured against 2.3 ms of touched-expert bytes; fitted 48-60 us per
    layer, benchmarks/device_campaign/FIDELITY.md)."""
    allreduce_latency_s: float = 15e-6
    link_efficiency: float = 0.7

    def save(self, path: str | Path) -> None:
        """Writes the coefficients as JSON (a calibration profile)."""
        Path(path).write_text(json.dumps(self.model_dump(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Efficiency:
        """Reads coefficients saved by `save`."""
        return cls.model_validate_json(Path(path).read_text())


DEFAULT_EFFICIENCY = Efficiency()
IDEAL = Efficiency(
    bandwidth=1.0,
    mfu_prefill=1.0,
    mfu_decode=1.0,
    step_overhead_s=0.0,
    moe_layer_overhead_s=0.0,
    allreduce_latency_s=0.0,
    link_efficiency=1.0,
)


class ModelCosts(BaseModel):
    """Per-GPU bytes and FLOPs of one model under one parallel setting (precomputed for fast step times)."""

    model_config = ConfigDict(frozen=True)

    tp: int
    num_layers: int
    hidden_size: int
    dense_weight_bytes: float
    """Weights every step streams on one GPU: all but the routed experts, lm_head included, embedding excluded."""
    expert_bytes: float = 0.0
    """One routed expert of one MoE layer on one GPU."""
    num_moe_layers: int = 0
    num_linear_layers: int = 0
    """Gated-DeltaNet (linear attention) layers; the rest of `num_layers` are full attention."""
    num_experts: int = 0
    top_k: int = 0
    kv_bytes_per_token: float
    """K+V of one token across all attention layers on one GPU."""
    state_bytes_per_seq: float = 0.0
    """Gated-DeltaNet state of one sequence on one GPU (read and written each step)."""
    flops_per_token: float
    """2 x active parameters (whole model; divided by TP when timed)."""
    attn_flops_per_pair: float
    """4 x heads x head_dim x attention layers: FLOPs per (query token, context token) pair."""
    draft_bytes: float = 0.0
    """MTP proposal: the MTP layer + lm_head streamed once per speculative token."""
    draft_flops_per_token: float = 0.0
    compute_dtype: str = "bfloat16"


class StepTime(BaseModel):
    """One step's time and its parts (seconds)."""

    model_config = ConfigDict(frozen=True)

    seconds: float
    memory_s: float
    compute_s: float
    comm_s: float
    overhead_s: float
    bytes: float
    flops: float

    @property
    def bound(self) -> str:
        """`memory` or `compute`: which roof the step sits under."""
        return "memory" if self.memory_s >= self.compute_s else "compute"


def model_costs(spec: ModelSpec, *, tp: int = 1, kv_cache_dtype: str = "auto", with_mtp: bool = False) -> ModelCosts:
    """The per-GPU cost figures of a model (weights as quantized, KV as `kv_cache_dtype`)."""
    p = spec.params
    per_linear = spec.quant.bytes_per_linear_param if spec.quant.method != "none" else 2.0
    routed = sum(layer.experts for layer in p.layers)
    dense_linear = p.body_linear - routed
    dense = (dense_linear * per_linear + p.body_other * 2 + p.lm_head_or_embed * 2) / tp
    kv_b = 1 if kv_cache_dtype.startswith("fp8") else 2
    n_attn = spec.num_full_attention_layers
    if spec.mla:
        kv_tok: float = n_attn * spec.mla.cache_dim * kv_b
        attn_pair = 4 * n_attn * spec.mla.num_heads * (spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim)
    else:
        assert spec.attention is not None
        kv_heads = max(1, spec.attention.num_kv_heads // tp) * tp
        kv_tok = n_attn * 2 * kv_heads * spec.attention.head_dim * kv_b / tp
        attn_pair = 4 * n_attn * spec.attention.num_heads * spec.attention.head_dim
    state = 0.0
    if spec.is_hybrid:
        state = spec.num_linear_layers * gdn_state_bytes(
            spec, tp=tp, num_spec_tokens=0, conv_dtype="auto", ssm_dtype="auto"
        )
    moe_layers = sum(1 for m in spec.layer_is_moe if m)
    expert = 0.0
    if spec.moe and moe_layers:
        expert = routed / moe_layers / spec.moe.num_experts * per_linear / tp
    draft_b = draft_f = 0.0
    if with_mtp and p.mtp_layer is not None:
        draft_b = (p.mtp_linear * per_linear + p.mtp_other * 2 + p.lm_head_or_embed * 2) / tp
        draft_f = 2 * (p.mtp_layer.active_linear + p.lm_head_or_embed + 2 * spec.hidden_size**2)
    compute_dtype = "fp8" if spec.quant.method == "fp8" else ("float16" if spec.dtype == "float16" else "bfloat16")
    return ModelCosts(
        tp=tp,
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        dense_weight_bytes=dense,
        expert_bytes=expert,
        num_moe_layers=moe_layers,
        num_linear_layers=spec.num_linear_layers if spec.is_hybrid else 0,
        num_experts=spec.moe.num_experts if spec.moe else 0,
        top_k=spec.moe.top_k if spec.moe else 0,
        kv_bytes_per_token=kv_tok,
        state_bytes_per_seq=state,
        flops_per_token=2 * p.active_per_token,
        attn_flops_per_pair=attn_pair,
        draft_bytes=draft_b,
        draft_flops_per_token=draft_f,
        compute_dtype=compute_dtype,
    )


def step_time(
    costs: ModelCosts,
    gpu: GPUSpec,
    *,
    decode_seqs: int = 0,
    decode_context: int = 0,
    prefill: list[tuple[int, int]] | None = None,
    spec_tokens: int = 0,
    eff: Efficiency = DEFAULT_EFFICIENCY,
    ideal: bool = False,
) -> StepTime:
    """Time of one step: `decode_seqs` sequences with `decode_context` context tokens in total, plus prefill
    chunks given as (new tokens, tokens already cached for that sequence), with `spec_tokens` drafts each."""
    e = IDEAL if ideal else eff
    chunks = prefill or []
    new_prefill = sum(n for n, _ in chunks)
    decode_tokens = decode_seqs * (1 + spec_tokens)
    tokens = decode_tokens + new_prefill
    if tokens == 0:
        return StepTime(seconds=0.0, memory_s=0.0, compute_s=0.0, comm_s=0.0, overhead_s=0.0, bytes=0.0, flops=0.0)
    tp = costs.tp
    weights = costs.dense_weight_bytes
    if costs.num_experts:
        touched = costs.num_experts * (1 - (1 - costs.top_k / costs.num_experts) ** tokens)
        weights += costs.num_moe_layers * touched * costs.expert_bytes
    kv_read = (decode_context * (1 + spec_tokens) + sum(c + n for n, c in chunks)) * costs.kv_bytes_per_token
    kv_write = tokens * costs.kv_bytes_per_token
    state = 2 * (decode_seqs + len(chunks)) * costs.state_bytes_per_seq
    draft = spec_tokens * costs.draft_bytes if decode_seqs else 0.0
    total_bytes = weights + kv_read + kv_write + state + draft
    decode_flops = (
        decode_tokens * costs.flops_per_token + (decode_context * (1 + spec_tokens)) * costs.attn_flops_per_pair
    )
    decode_flops += decode_seqs * spec_tokens * costs.draft_flops_per_token
    prefill_flops = sum(n * costs.flops_per_token + (n * c + n * n / 2) * costs.attn_flops_per_pair for n, c in chunks)
    peak = gpu.peak_tflops(costs.compute_dtype) * 1e12
    compute = (prefill_flops / e.mfu_prefill + decode_flops / e.mfu_decode) / tp / peak
    memory = total_bytes / (gpu.bandwidth_bytes_s * e.bandwidth)
    comm = 0.0
    if tp > 1:
        payload = 2 * (tp - 1) / tp * tokens * costs.hidden_size * 2
        per = e.allreduce_latency_s + payload / (gpu.link_bandwidth_bytes_s * e.link_efficiency)
        comm = (2 * costs.num_layers + 1) * per
    overhead = e.step_overhead_s + costs.num_moe_layers * e.moe_layer_overhead_s
    return StepTime(
        seconds=max(memory, compute) + comm + overhead,
        memory_s=memory,
        compute_s=compute,
        comm_s=comm,
        overhead_s=overhead,
        bytes=total_bytes,
        flops=prefill_flops + decode_flops,
    )


def decode_step_time(
    costs: ModelCosts,
    gpu: GPUSpec,
    *,
    batch: int,
    context: int | list[int],
    spec_tokens: int = 0,
    eff: Efficiency = DEFAULT_EFFICIENCY,
    ideal: bool = False,
) -> StepTime:
    """One decode step of `batch` sequences; `context` is each one's length (int = same for all) or a list."""
    total = sum(context) if isinstance(context, list) else batch * context
    return step_time(costs, gpu, decode_seqs=batch, decode_context=total, spec_tokens=spec_tokens, eff=eff, ideal=ideal)


def prefill_time(
    costs: ModelCosts,
    gpu: GPUSpec,
    *,
    tokens: int,
    cached: int = 0,
    chunk: int = 8192,
    eff: Efficiency = DEFAULT_EFFICIENCY,
    ideal: bool = False,
) -> float:
    """Seconds to prefill `tokens` new tokens after `cached` cached ones, in chunks of `chunk` (one per step).

    In closed form, not step by step: every term of a step is linear in its new tokens except attention, which is
    linear in (new x context), so the full chunks' FLOPs, bytes and overheads sum as arithmetic series and the
    bound (memory or compute) of a full chunk is decided once per constant part. A 10^12-token prompt or a 1-token
    budget costs the same few operations as a 32K prompt."""
    if tokens <= 0:
        return 0.0
    chunk = max(1, chunk)
    full, rest = divmod(tokens, chunk)
    seconds = 0.0
    if full:
        # step j (0-based) of the full chunks: (chunk new tokens, cached + j*chunk context). Its compute and
        # memory times are a + b*j; the max of two lines over j = 0..full-1 splits at one crossing point.
        first = step_time(costs, gpu, prefill=[(chunk, cached)], eff=eff, ideal=ideal)
        if full == 1:
            seconds += first.seconds
        else:
            second = step_time(costs, gpu, prefill=[(chunk, cached + chunk)], eff=eff, ideal=ideal)
            seconds += _sum_max_of_lines(
                first.compute_s,
                second.compute_s - first.compute_s,
                first.memory_s,
                second.memory_s - first.memory_s,
                full,
            )
            seconds += full * (first.comm_s + first.overhead_s)
    if rest:
        seconds += step_time(costs, gpu, prefill=[(rest, cached + full * chunk)], eff=eff, ideal=ideal).seconds
    return seconds


def _sum_max_of_lines(a1: float, b1: float, a2: float, b2: float, n: int) -> float:
    """sum over j = 0..n-1 of max(a1 + b1*j, a2 + b2*j), exactly, in O(1)."""

    def line_sum(a: float, b: float, lo: int, hi: int) -> float:  # sum over j in [lo, hi)
        count = hi - lo
        return a * count + b * (lo + hi - 1) * count / 2 if count > 0 else 0.0

    if b1 == b2:
        return line_sum(max(a1, a2), b1, 0, n)
    cross = (a2 - a1) / (b1 - b2)  # where line 1 overtakes (or falls below) line 2
    k = min(max(math.ceil(cross), 0), n) if math.isfinite(cross) else 0
    if b1 > b2:  # line 1 wins from k on
        return line_sum(a2, b2, 0, k) + line_sum(a1, b1, k, n)
    return line_sum(a1, b1, 0, k) + line_sum(a2, b2, k, n)


def accepted_tokens(spec_tokens: int, acceptance_rate: float) -> float:
    """Expected drafts accepted per step when each position is accepted with `acceptance_rate` given the last."""
    return sum(acceptance_rate**i for i in range(1, spec_tokens + 1))
