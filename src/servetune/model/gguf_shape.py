"""A GGUF model's KV-cache bytes per token, from the shapes in its header: what llama.cpp allocates per context
token (`llama_kv_cache`: every layer's K and V rows, `n_head_kv x head_dim` each, in the cache's data type), which
its log does not state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CACHE_TYPE_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
"""Bytes per element of llama.cpp's KV cache types (`--cache-type-k/-v`; f16 by default): ggml's block sizes."""


def _field(fields: dict[str, Any], key: str) -> list[int] | None:
    field = fields.get(key)
    if field is None or not field.data:
        return None
    return [int(field.parts[i][0]) for i in field.data]


def kv_bytes_per_token(path: str | Path, cache_type_k: str = "f16", cache_type_v: str = "f16") -> int | None:
    """Bytes of KV cache one context token takes across all layers; None when the file or its shapes cannot be
    read, or a cache type is unknown."""
    if cache_type_k not in CACHE_TYPE_BYTES or cache_type_v not in CACHE_TYPE_BYTES:
        return None
    try:
        import gguf

        fields = gguf.GGUFReader(str(path)).fields
        arch = bytes(fields["general.architecture"].parts[-1]).decode()
    except Exception:  # noqa: BLE001 - gguf raises its own and numpy's errors on a file that is not GGUF
        return None
    layers = _field(fields, f"{arch}.block_count")
    heads = _field(fields, f"{arch}.attention.head_count")
    kv_heads = _field(fields, f"{arch}.attention.head_count_kv") or heads
    width = _field(fields, f"{arch}.embedding_length")
    if not layers or not heads or not kv_heads or not width or not heads[0]:
        return None
    k_dim = (_field(fields, f"{arch}.attention.key_length") or [width[0] // heads[0]])[0]
    v_dim = (_field(fields, f"{arch}.attention.value_length") or [width[0] // heads[0]])[0]
    per_layer = kv_heads if len(kv_heads) == layers[0] else kv_heads * layers[0]
    rows = sum(per_layer)
    return round(rows * (k_dim * CACHE_TYPE_BYTES[cache_type_k] + v_dim * CACHE_TYPE_BYTES[cache_type_v]))
