"""vLLM's KV-cache layout and capacity, computed the way vLLM computes it (v1 engine).

Code locations (vLLM 0.24.0, same shapes in 0.20-0.33): page sizes `v1/kv_cache_interface.py`; hybrid block
alignment `platforms/interface.py::_align_hybrid_block_size`; grouping `v1/core/kv_cache_utils.py::
_get_kv_cache_groups_uniform_page_size`; blocks `get_num_blocks` (available // page // group_size);
capacity `get_max_concurrency_for_kv_cache_config` / `get_kv_cache_capacity`; admission check
`_check_enough_kv_cache_memory`. Everything here is per GPU (one worker) and pure integer arithmetic, so the
startup lines come out exactly as vLLM prints them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from servetune.model.spec import ModelSpec
from servetune.plan.versions import VllmBehaviour

GroupKind = Literal["full_attention", "sliding_attention", "mamba"]
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "auto": 2}


def cdiv(a: int, b: int) -> int:
    """Ceiling division, as vLLM's `cdiv`."""
    return -(-a // b)


class CacheGroup(BaseModel):
    """One KV-cache group: layers of one kind that share a block table."""

    model_config = ConfigDict(frozen=True)

    kind: GroupKind
    layers: int
    """Real layers in the group on this worker (the rest of `group_size` is padding)."""
    sliding_window: int | None = None


class KVLayout(BaseModel):
    """Block size, groups and page sizes of one worker: what the scheduler allocates in."""

    model_config = ConfigDict(frozen=True)

    block_size: int
    attn_page_bytes_per_token: int
    """Bytes of one token in one attention layer on this GPU (K+V, or the MLA latent)."""
    page_size_bytes: int
    """One block of one layer (uniform across groups; mamba pages are padded to it)."""
    mamba_page_unpadded_bytes: int = 0
    groups: list[CacheGroup]
    group_size: int
    """Layers per group (the max); one block id costs `group_size * page_size_bytes`."""
    mamba_slots_per_request: int = 0
    """Blocks each mamba group holds per request: 1 + spec tokens, or 2 + spec tokens with prefix caching."""
    block_size_forced: bool = False
    """True when the hybrid alignment raised the block size (vLLM logs 'Setting attention block size...')."""
    max_num_batched_tokens: int = 2048

    @property
    def bytes_per_block(self) -> int:
        """Memory one block id costs across all groups on this GPU."""
        return self.group_size * self.page_size_bytes

    @property
    def mamba_padding_pct(self) -> float:
        """vLLM's 'Padding mamba page size by X%' figure."""
        if not self.mamba_page_unpadded_bytes:
            return 0.0
        return 100 * (self.page_size_bytes - self.mamba_page_unpadded_bytes) / self.mamba_page_unpadded_bytes

    def blocks_for(self, tokens: int) -> int:
        """Blocks one request of `tokens` tokens holds (the admission cost in the shared pool)."""
        total = 0
        for group in self.groups:
            if group.kind == "mamba":
                total += self.mamba_slots_per_request
            elif group.kind == "sliding_attention" and group.sliding_window:
                window = min(group.sliding_window - 1 + self.max_num_batched_tokens, tokens)
                total += cdiv(window, self.block_size) + 1
            else:
                total += cdiv(tokens, self.block_size)
        return total


class Capacity(BaseModel):
    """Blocks, concurrency and the startup lines for one KV budget."""

    model_config = ConfigDict(frozen=True)

    available_kv_bytes: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int
    fits_one_request: bool
    needed_bytes: int
    """KV memory one request at max_model_len needs (vLLM's admission check)."""
    estimated_max_model_len: int
    log_lines: list[str]


def layout(
    spec: ModelSpec,
    *,
    tp: int,
    pp: int,
    kv_cache_dtype: str,
    block_size: int | None,
    num_spec_tokens: int,
    mtp_drafter: bool,
    prefix_caching: bool,
    mamba_cache_dtype: str,
    mamba_ssm_cache_dtype: str,
    compute_capability: float,
    max_num_batched_tokens: int,
) -> KVLayout:
    """The KV layout of the worker with the most cache layers (PP stage 0 ties go to the first)."""
    kv_bytes = 1 if kv_cache_dtype.startswith("fp8") else _DTYPE_BYTES.get(kv_cache_dtype, 2)  # auto = 16-bit
    if spec.mla is not None:
        attn_1 = spec.mla.cache_dim * kv_bytes
        # backend page sizes: FlashMLA 64 tokens (Hopper), CUTLASS MLA 128 (Blackwell), Triton MLA 16
        preferred = 64 if 9.0 <= compute_capability < 10.0 else 128 if compute_capability >= 10.0 else 16
    else:
        assert spec.attention is not None
        kv_heads = max(1, spec.attention.num_kv_heads // tp)
        attn_1 = 2 * kv_heads * spec.attention.head_dim * kv_bytes
        preferred = 16
    block = block_size or preferred

    mamba_unpadded = 0
    forced = False
    if spec.is_hybrid:
        mamba_unpadded = gdn_state_bytes(
            spec, tp=tp, num_spec_tokens=num_spec_tokens, conv_dtype=mamba_cache_dtype, ssm_dtype=mamba_ssm_cache_dtype
        )
        align = max(16, block)
        aligned = align * cdiv(mamba_unpadded, align * attn_1)
        if block < aligned:
            block, forced = aligned, True
    page = block * attn_1

    counts = _stage_layer_counts(spec, pp, extra_full=1 if mtp_drafter else 0)
    groups, group_size = _groups(counts, spec)
    slots = (2 if prefix_caching else 1) + num_spec_tokens if spec.is_hybrid else 0
    return KVLayout(
        block_size=block,
        attn_page_bytes_per_token=attn_1,
        page_size_bytes=page,
        mamba_page_unpadded_bytes=mamba_unpadded,
        groups=groups,
        group_size=group_size,
        mamba_slots_per_request=slots,
        block_size_forced=forced,
        max_num_batched_tokens=max_num_batched_tokens,
    )


def gdn_state_bytes(spec: ModelSpec, *, tp: int, num_spec_tokens: int, conv_dtype: str, ssm_dtype: str) -> int:
    """One Gated-DeltaNet layer's state for one sequence on one GPU (`gated_delta_net_state_shape`).

    conv: (conv_dim/tp) x (kernel-1+spec) in the model dtype (or --mamba-cache-dtype); temporal:
    (v_heads/tp) x v_dim x k_dim in float32 when the config pins `mamba_ssm_dtype` (Qwen3.5/3.6 hook).
    """
    lin = spec.linear_attention
    assert lin is not None
    conv_bytes = _DTYPE_BYTES.get(conv_dtype, 2) if conv_dtype != "auto" else 2
    if ssm_dtype != "auto":
        ssm_bytes = _DTYPE_BYTES.get(ssm_dtype, 2)
    elif lin.ssm_dtype:
        ssm_bytes = _DTYPE_BYTES[lin.ssm_dtype]
    else:
        ssm_bytes = conv_bytes
    conv = (lin.conv_dim // tp) * (lin.conv_kernel - 1 + num_spec_tokens) * conv_bytes
    ssm = (lin.num_v_heads // tp) * lin.v_head_dim * lin.k_head_dim * ssm_bytes
    return conv + ssm


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage (vLLM's `get_pp_indices`: remainder goes to the stages before the last)."""
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    return sizes


def _stage_layer_counts(spec: ModelSpec, pp: int, extra_full: int) -> list[dict[GroupKind, int]]:
    """Cache layers by kind on each PP stage (the MTP drafter's layer sits on the last stage)."""
    stages: list[dict[GroupKind, int]] = []
    start = 0
    for n in pp_partition(spec.num_layers, pp):
        counts: dict[GroupKind, int] = {}
        for kind in spec.layer_types[start : start + n]:
            key: GroupKind = "mamba" if kind == "linear_attention" else kind
            counts[key] = counts.get(key, 0) + 1
        stages.append(counts)
        start += n
    if extra_full:
        stages[-1]["full_attention"] = stages[-1].get("full_attention", 0) + extra_full
    return stages


def _groups(stages: list[dict[GroupKind, int]], spec: ModelSpec) -> tuple[list[CacheGroup], int]:
    """vLLM's grouping over the whole model, projected onto the worker that needs the biggest pool."""
    total: dict[GroupKind, int] = {}
    for counts in stages:
        for kind, n in counts.items():
            total[kind] = total.get(kind, 0) + n
    window = spec.attention.sliding_window if spec.attention else None
    if len(total) == 1:
        kind = next(iter(total))
        worst = max(c.get(kind, 0) for c in stages)
        return [CacheGroup(kind=kind, layers=worst, sliding_window=window)], worst
    smallest, largest = min(total.values()), max(total.values())
    global_size = largest if largest < smallest * 1.5 else smallest
    groups: list[CacheGroup] = []
    worker_size = 0
    for kind, n in total.items():
        num_groups = cdiv(n, global_size)
        per_worker = max(cdiv(c.get(kind, 0), num_groups) for c in stages)
        worker_size = max(worker_size, per_worker)
        for i in range(num_groups):
            real = len(range(i, n, num_groups))
            groups.append(CacheGroup(kind=kind, layers=real if len(stages) == 1 else per_worker, sliding_window=window))
    return groups, worker_size


def capacity(
    lay: KVLayout,
    *,
    available_kv_bytes: int,
    max_model_len: int,
    behaviour: VllmBehaviour,
    num_gpu_blocks_override: int | None = None,
) -> Capacity:
    """num_blocks, blocks per request, max concurrency and the two startup lines, rounded as vLLM rounds."""
    num_blocks = max(int(available_kv_bytes // lay.page_size_bytes // lay.group_size), 0)
    if num_gpu_blocks_override is not None:
        num_blocks = num_gpu_blocks_override
        available_kv_bytes = num_blocks * lay.bytes_per_block
    per_request = lay.blocks_for(max_model_len)
    concurrency = num_blocks / per_request
    if behaviour.legacy_token_count:
        tokens = num_blocks // len(lay.groups) * lay.block_size
    else:
        tokens = int(concurrency * max_model_len)
    needed = _needed_bytes(lay, max_model_len)
    check = fit_budget(lay, available_kv_bytes, behaviour)
    fits = available_kv_bytes > 0 and needed <= check
    return Capacity(
        available_kv_bytes=available_kv_bytes,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        kv_cache_tokens=tokens,
        fits_one_request=fits,
        needed_bytes=needed,
        estimated_max_model_len=max_model_len if fits else estimate_max_model_len(lay, check, max_model_len),
        log_lines=capacity_log_lines(tokens, max_model_len, concurrency, one_line=behaviour.one_line_capacity_log),
    )


def fit_budget(lay: KVLayout, available_kv_bytes: int, behaviour: VllmBehaviour) -> int:
    """The memory the admission check compares against (0.33 keeps the null block out of it)."""
    return available_kv_bytes - (lay.bytes_per_block if behaviour.null_block_in_fit_check else 0)


def _needed_bytes(lay: KVLayout, max_model_len: int) -> int:
    """`_max_memory_usage_bytes_from_groups`: group_size x page x blocks one max-length request needs."""
    return lay.bytes_per_block * lay.blocks_for(max_model_len)


def estimate_max_model_len(lay: KVLayout, available: int, upper: int) -> int:
    """The largest max_model_len whose one request fits (vLLM's binary search); 0 if not even one token."""
    if available <= 0 or _needed_bytes(lay, 1) > available:
        return 0
    lo, hi, best = 1, upper, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if _needed_bytes(lay, mid) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def capacity_log_lines(tokens: int, max_model_len: int, concurrency: float, *, one_line: bool) -> list[str]:
    """The startup lines exactly as vLLM formats them (`{:,}` tokens, `%.2fx` concurrency)."""
    size = f"GPU KV cache size: {tokens:,} tokens"
    conc = f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"
    return [f"{size}, {conc}"] if one_line else [size, conc]
