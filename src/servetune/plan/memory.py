"""Memory before the KV cache: weights per GPU, and a model of vLLM's non-KV overhead with its uncertainty.

vLLM (0.20+, `gpu_worker.determine_available_memory`):
    available_kv = ceil(total * util) - weights - non_torch - torch_peak - cudagraph_estimate
(vLLM logs the middle terms at DEBUG: "torch peak memory increase", "non-torch forward increase memory"; the graph
estimate as "Estimated CUDA graph memory"). Weights are exact arithmetic on the shapes. The other terms depend on
kernels, drivers and NCCL, so they are modelled per architecture family (dense, hybrid, MoE, hybrid MoE) with
coefficients (`OverheadModel`) fitted to measured starts and a stated uncertainty that covers them
(benchmarks/device_campaign/PLANNER.md: `planner_fit.py`). With `available_kv_bytes` (from a log or
`--kv-cache-memory-bytes`) the overhead model is bypassed and the rest of the ledger is exact.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from servetune.model.spec import ModelSpec
from servetune.plan.kvcache import pp_partition

GiB = 1024**3

Family = Literal["dense", "hybrid", "moe", "hybrid_moe"]


def family_of(spec: ModelSpec) -> Family:
    """The architecture family the overhead model is fitted per: recurrent (Gated-DeltaNet/Mamba) layers or not,
    routed experts or not."""
    if spec.is_hybrid:
        return "hybrid_moe" if spec.moe else "hybrid"
    return "moe" if spec.moe else "dense"


class FamilyOverhead(BaseModel):
    """The family-specific part of the non-KV overhead (fitted per family; `planner_fit.py`)."""

    model_config = ConfigDict(frozen=True)

    profile_gib: float
    """Torch peak of the profiling run besides the sampler's logits, at TP1 (divided by TP): buffers that did not
    grow with max_num_batched_tokens (2.4 GiB for Qwen3.6-27B at 2048 and at 8192)."""
    cudagraph_per_layer_size_kib: float
    """CUDA-graph estimate per captured batch size per decoder layer (FULL_AND_PIECEWISE)."""


FAMILIES: dict[str, FamilyOverhead] = {
    "dense": FamilyOverhead(profile_gib=0.91, cudagraph_per_layer_size_kib=308.0),
    "hybrid": FamilyOverhead(profile_gib=2.44, cudagraph_per_layer_size_kib=308.0),
    "moe": FamilyOverhead(profile_gib=1.98, cudagraph_per_layer_size_kib=274.0),
    "hybrid_moe": FamilyOverhead(profile_gib=2.87, cudagraph_per_layer_size_kib=833.0),
}
"""Fitted on vLLM 0.24.0 starts on an H200 (benchmarks/device_campaign/PLANNER.md): dense on Qwen3-32B (D1, V2
model runner), hybrid on Qwen3.6-27B (H1 and benchmarks/device A, B, C), MoE on Qwen3-30B-A3B (M1), hybrid MoE on
Qwen3.6-35B-A3B (X1). The dense family's graph coefficient is the hybrid one (0.24 runs its dense models with the
V2 runner, which reserves no graph memory, so none was measured)."""


class OverheadModel(BaseModel):
    """Coefficients of the non-KV overhead (GiB unless noted); `*_unc` are +- bounds, not standard errors.

    The torch peak of vLLM's profiling run is a family constant plus the sampler warm-up's logits (rows x vocab):
    vLLM 0.24.0 on an H200 peaked at 3.57 / 3.51 / 2.47 GiB for Qwen3.6-27B at (8192 tokens, 1024 rows) /
    (2048, 1024) / (2048, 32): flat in max_num_batched_tokens between 2048 and 8192 (larger budgets were not
    measured, a plan note says so), linear in rows. Non-torch memory was 0.22-0.25 GiB on every model at TP1."""

    model_config = ConfigDict(frozen=True)

    non_torch_gib: float = 0.24
    """Memory the profiling run takes outside torch's allocator, at TP1 (0.22-0.25 GiB measured, six starts)."""
    non_torch_tp_gib: float = 1.0
    """Extra with TP > 1: NCCL communicators and custom all-reduce buffers (vLLM PR #10511: +1.8 GiB at TP2)."""
    non_torch_unc_gib: float = 0.1
    sampler_bytes_per_logit: float = 4.81
    """Bytes per [min(max_num_seqs, max_num_batched_tokens) x (1 + spec tokens) x vocab] element alive at the
    sampler warm-up's peak (1.1 GiB between 32 and 1024 rows of Qwen3.6-27B's 248,320-token vocabulary)."""
    spec_decode_gib_per_token: float = 0.76
    """Drafter (MTP) profiling memory per speculative token (Qwen3.6-27B with MTP 2: 1.5 GiB)."""
    measured_tokens: int = 8192
    """The largest max_num_batched_tokens measured; beyond it the profiling activations may grow (a plan note)."""
    profile_unc_gib: float = 0.6
    """Bound on the torch peak's error: one or two models per family were measured; it covers the largest miss
    of the per-family fit on a start it was not fitted to (benchmarks/device_campaign/PLANNER.md)."""
    families: dict[str, FamilyOverhead] = Field(default_factory=lambda: dict(FAMILIES))
    cudagraph_base_gib: float = 0.0
    cudagraph_unc_frac: float = 0.5
    mm_encoder_gib: float = 1.5
    """Vision encoder dummy batch + encoder cache profiled unless --language-model-only."""
    mm_encoder_unc_gib: float = 1.5


class Overhead(BaseModel):
    """The modelled non-KV memory of one GPU, by term, with a +- bound on the total."""

    model_config = ConfigDict(frozen=True)

    family: str = "dense"
    non_torch_bytes: int
    activation_bytes: int
    """The profiling forward pass's buffers (the family constant over TP)."""
    sampler_bytes: int
    cudagraph_bytes: int
    mm_encoder_bytes: int
    uncertainty_bytes: int

    @property
    def peak_activation_bytes(self) -> int:
        """The torch peak of the profiling run ("torch peak memory increase"): the forward pass's buffers stay
        allocated while the sampler warm-up runs, so the two add up."""
        return self.activation_bytes + self.sampler_bytes

    @property
    def total_bytes(self) -> int:
        """All modelled non-KV, non-weight memory."""
        return self.non_torch_bytes + self.peak_activation_bytes + self.cudagraph_bytes + self.mm_encoder_bytes


def weights_per_gpu(spec: ModelSpec, *, tp: int, pp: int, with_mtp: bool) -> int:
    """Bytes of weights on the most loaded GPU ("Model loading took X GiB").

    Projections, experts and vocab-parallel embedding/lm_head are split over TP; k/v projections are
    replicated when TP exceeds the KV heads (each GPU keeps one KV head); norms, small vectors and the RoPE
    cos/sin cache are replicated (vLLM issue #10517: Llama-3.1-8B "took 14.9888 GB" = 8.03 B x 2 B + the
    131,072 x 128 x 2 B cache; Qwen3.6-27B on the H200 with vLLM 0.24.0 "took 50.22 GiB" = 26.90 B x 2 B + the
    MRoPE cache of 4 x 262,144 x 64 x 2 B). With PP the embedding lives on the first stage, lm_head, final norm
    and MTP on the last.
    """
    per_linear = spec.quant.bytes_per_linear_param if spec.quant.method != "none" else 2.0
    dense = 2
    p = spec.params
    kv_extra = 0.0
    if spec.attention and spec.attention.num_kv_heads < tp:
        kv_extra = 1 / spec.attention.num_kv_heads - 1 / tp
    stages: list[float] = []
    start = 0
    sizes = pp_partition(spec.num_layers, pp)
    for i, n in enumerate(sizes):
        b = 0.0
        for layer in p.layers[start : start + n]:
            b += layer.linear * per_linear / tp + layer.kv_linear * per_linear * kv_extra + layer.other * dense
        if i == 0:
            b += p.embed * dense / tp
            if spec.vision and not spec.language_model_only:
                b += p.vision * dense / tp
        if spec.rotary_dim:
            # vLLM counts RotaryEmbedding's cos/sin cache [max_position, rotary_dim] (model dtype) as model memory
            b += spec.rope_cache_positions * spec.rotary_dim * dense
        if i == len(sizes) - 1:
            tied_copy = p.embed if (p.lm_head == 0 and pp > 1) else 0
            b += (p.lm_head + tied_copy) * dense / tp + p.final_norm * dense
            if with_mtp:
                # the drafter builds its own (text-only) RoPE cache: 51.05 GiB logged with MTP vs 50.22 without
                b += p.mtp_linear * per_linear / tp + p.mtp_other * dense
                b += spec.max_position_embeddings * spec.rotary_dim * dense
        stages.append(b)
        start += n
    return int(max(stages))


def capture_sizes(max_num_seqs: int, spec_tokens: int, max_capture: int | None, max_num_batched_tokens: int) -> int:
    """How many CUDA-graph batch sizes vLLM captures: [1,2,4] + 8..248 step 8 + 256.. step 16 up to the max
    (`max_num_seqs x (1 + spec tokens) x 2`, at most 512 and max_num_batched_tokens)."""
    top = max_capture if max_capture is not None else min(max_num_seqs * (1 + spec_tokens) * 2, 512)
    top = min(top, max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += [s for s in range(8, 256, 8) if s <= top]
    sizes += [s for s in range(256, top + 1, 16)]
    return len(sizes)


def overhead(
    spec: ModelSpec,
    *,
    tp: int,
    pp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    spec_tokens: int,
    cudagraphs: bool,
    max_capture: int | None,
    model: OverheadModel,
) -> Overhead:
    """The non-KV overhead of one GPU during vLLM's profiling run (`cudagraphs`: whether vLLM reserves the graph
    estimate before sizing the KV cache)."""
    family = family_of(spec)
    coef = model.families.get(family) or FAMILIES[family]
    # the family constant is per-layer work buffers, split over TP like the heads; the sampler's logits are
    # gathered on every rank
    activation = coef.profile_gib * GiB / tp
    rows = min(max_num_seqs, max_num_batched_tokens) * (1 + spec_tokens)
    sampler = rows * spec.vocab_size * model.sampler_bytes_per_logit
    non_torch = (
        model.non_torch_gib
        + (model.non_torch_tp_gib if tp * pp > 1 else 0)
        + spec_tokens * model.spec_decode_gib_per_token
    ) * GiB
    layers_here = max(pp_partition(spec.num_layers, pp))
    graphs = 0.0
    if cudagraphs:
        n = capture_sizes(max_num_seqs, spec_tokens, max_capture, max_num_batched_tokens)
        graphs = model.cudagraph_base_gib * GiB + n * layers_here * coef.cudagraph_per_layer_size_kib * 1024
    mm = model.mm_encoder_gib * GiB if spec.vision and not spec.language_model_only else 0.0
    unc = (
        model.non_torch_unc_gib * GiB
        + model.profile_unc_gib * GiB
        + model.cudagraph_unc_frac * graphs
        + (model.mm_encoder_unc_gib * GiB if mm else 0)
    )
    return Overhead(
        family=family,
        non_torch_bytes=int(non_torch),
        activation_bytes=int(activation),
        sampler_bytes=int(sampler),
        cudagraph_bytes=int(graphs),
        mm_encoder_bytes=int(mm),
        uncertainty_bytes=int(unc),
    )


def requested_memory(total_bytes: int, utilization: float) -> int:
    """vLLM's budget: ceil(total device memory x gpu_memory_utilization)."""
    return math.ceil(total_bytes * utilization)
