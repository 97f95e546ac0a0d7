"""`EngineFacts`: what an engine decided at startup, read from its own log.

The planner calibrates against these (weights memory, KV capacity, block size...), so they are structured
fields, each None when the log did not say.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class EngineFacts(BaseModel):
    """Startup facts of one launch (vLLM-shaped; llama.cpp fills its own fields)."""

    def cudagraph_estimate_bytes(self, total_bytes: int) -> int | None:
        """The CUDA-graph estimate vLLM subtracted (from its utilization equivalence line; ±0.00005 × total)."""
        if self.util_with_graphs is None or self.util_without_graphs is None:
            return None
        return round((self.util_with_graphs - self.util_without_graphs) * total_bytes)

    @property
    def available_kv_bytes(self) -> int | None:
        """The logged available KV memory in bytes (vLLM prints GiB with two decimals; the midpoint is used)."""
        return None if self.available_kv_gib is None else round(self.available_kv_gib * 1024**3)

    model_config = ConfigDict(frozen=True)

    engine: str
    version: str | None = None
    non_default_args: dict[str, Any] | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    weights_gib: float | None = None
    weights_load_s: float | None = None
    attention_backend: str | None = None
    block_size: int | None = None
    available_kv_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    cuda_graph_estimate_gib: float | None = None
    cuda_graph_gib: float | None = None
    cuda_graph_capture_s: float | None = None
    compile_s: float | None = None
    init_engine_s: float | None = None
    compile_cache: str | None = None
    """`warm`: every compiled graph came from vLLM's compile cache; `cold`: at least one was compiled (no cache
    entry for this config's key, or one vLLM could not load); None: the log has no compile lines (--enforce-eager,
    or a start that died before compiling)."""
    compile_cache_key: str | None = None
    """The folder vLLM keyed its compile cache by (`torch_compile_cache/<key>`, else the AOT artifact's hash)."""
    compile_cache_note: str | None = None
    """Why a cache entry that was there did not load (vLLM's own words), when it says so."""
    auto_fit_max_model_len: int | None = None
    util_with_graphs: float | None = None
    """From "The current --gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=E": U ..."""
    util_without_graphs: float | None = None
    """... and E (their difference × the GPU's memory is the CUDA-graph estimate vLLM subtracted)."""
    capacity_lines: list[str] | None = None
    """vLLM's own "GPU KV cache size" / "Maximum concurrency" lines, verbatim (the planner reproduces them)."""
    kv_cache_dtype: str | None = None
    """From vLLM's engine config line (`kv_cache_dtype=fp8`): the KV dtype it runs with."""
    enable_prefix_caching: bool | None = None
    """From vLLM's engine config line (`enable_prefix_caching=False`)."""
    enable_chunked_prefill: bool | None = None
    """From vLLM's engine config line (`enable_chunked_prefill=True`)."""
    engine_config_line: str | None = None
    """vLLM's "Initializing a V1 LLM engine ... with config: ..." line, verbatim (the proof of the values above)."""
    # llama.cpp
    n_ctx: int | None = None
    n_ctx_per_slot: int | None = None
    n_slots: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
