"""`EngineFacts`: what an engine decided at startup, read from its own log.

The planner calibrates against these (weights memory, KV capacity, block size...), so they are structured
fields, each None when the log did not say.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class EngineFacts(BaseModel):
    """Startup facts of one launch (vLLM-shaped; llama.cpp fills its own fields)."""

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
    auto_fit_max_model_len: int | None = None
    # llama.cpp
    n_ctx: int | None = None
    n_ctx_per_slot: int | None = None
    n_slots: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
