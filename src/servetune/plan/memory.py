"""Memory before the KV cache: weights per GPU, and a model of vLLM's non-KV overhead with its uncertainty.

vLLM (0.20+, `gpu_worker.determine_available_memory`):
    available_kv = ceil(total * util) - weights - non_torch - activation_peak - cudagraph_estimate
Weights are exact arithmetic on the shapes. The other terms depend on kernels, drivers and NCCL, so they are
modelled with coefficients (`OverheadModel`) that come with a stated uncertainty and can be calibrated from
startup logs ("Available KV cache memory", "Model loading took"). With `available_kv_bytes` (from a log or
`--kv-cache-memory-bytes`) the overhead model is bypassed and the rest of the ledger is exact.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from servetune.model.spec import ModelSpec
from servetune.plan.kvcache import pp_partition

GiB = 1024**3


class OverheadModel(BaseModel):
    """Coefficients of the non-KV overhead (GiB unless noted); `*_unc` are +- bounds, not standard errors.

    Defaults are fitted to three real vLLM 0.24.0 starts of Qwen3.6-27B on an H200 (benchmarks/device: default
    batch limits; max_num_batched_tokens 2048 + max_num_seqs 32; FP8 KV + MTP 2), which they reproduce within
    0.15 GiB; other GPUs and models lean on the same coefficients, hence the stated ranges.
    """

    model_config = ConfigDict(frozen=True)

    non_torch_gib: float = 2.3
    """Memory the profiling run takes outside torch's allocator plus allocator slack, at TP1."""
    non_torch_tp_gib: float = 1.0
    """Extra with TP > 1: NCCL communicators and custom all-reduce buffers (vLLM PR #10511: +1.8 GiB at TP2)."""
    non_torch_unc_gib: float = 0.8
    activation_copies: float = 1.14
    """Scales the modelled peak of the profiling forward pass (max_num_batched_tokens tokens)."""
    activation_unc_frac: float = 0.5
    sampler_bytes_per_logit: float = 6.25
    """Bytes per [min(max_num_seqs, max_num_batched_tokens) x (1 + spec tokens) x vocab] element alive at the
    sampler warm-up's peak (fp32 logits, probabilities, top-k/top-p buffers)."""
    spec_decode_gib_per_token: float = 0.5
    """Drafter (MTP) profiling memory per speculative token."""
    cudagraph_base_gib: float = 0.0
    cudagraph_per_layer_size_kib: float = 300.0
    """CUDA-graph estimate per captured batch size per decoder layer (hybrid FULL_AND_PIECEWISE on an H200)."""
    cudagraph_unc_frac: float = 0.5
    mm_encoder_gib: float = 1.5
    """Vision encoder dummy batch + encoder cache profiled unless --language-model-only."""
    mm_encoder_unc_gib: float = 1.5


class Overhead(BaseModel):
    """The modelled non-KV memory of one GPU, by term, with a +- bound on the total."""

    model_config = ConfigDict(frozen=True)

    non_torch_bytes: int
    activation_bytes: int
    sampler_bytes: int
    cudagraph_bytes: int
    mm_encoder_bytes: int
    uncertainty_bytes: int

    @property
    def peak_activation_bytes(self) -> int:
        """The torch peak of the profiling run: the forward pass and the sampler warm-up run one after the
        other (`profile_run`: `_dummy_run(max_num_tokens)` then `_dummy_sampler_run`), so the larger counts."""
        return max(self.activation_bytes, self.sampler_bytes)

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
    """The non-KV overhead of one GPU during vLLM's profiling run."""
    hidden = spec.hidden_size
    if spec.moe:
        inter = spec.moe.top_k * spec.moe.expert_intermediate + spec.moe.shared_intermediate
    else:
        inter = spec.intermediate_size
    tokens = max_num_batched_tokens
    # gate_up output (2I) + activation (I) + a few hidden-sized buffers, 2 bytes each, per token on this GPU
    per_token = 2 * (3 * inter / tp + 6 * hidden)
    activation = tokens * per_token * model.activation_copies
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
        graphs = model.cudagraph_base_gib * GiB + n * layers_here * model.cudagraph_per_layer_size_kib * 1024
    mm = model.mm_encoder_gib * GiB if spec.vision and not spec.language_model_only else 0.0
    unc = (
        model.non_torch_unc_gib * GiB
        + model.activation_unc_frac * max(activation, sampler)
        + model.cudagraph_unc_frac * graphs
        + (model.mm_encoder_unc_gib * GiB if mm else 0)
    )
    return Overhead(
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
