"""Writes the tiny model as a GGUF file (what llama.cpp loads), from the same tensors as the HF files.

Names and the Q/K row permutation follow llama.cpp's own HF converter, so both engines compute the same model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from servetune.tiny.tokenizer import CHAT_TEMPLATE, END_OF_TEXT, IM_END, SPECIAL_TOKENS, merges
from servetune.tiny.weights import TinyLlamaSpec

_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def _permute_rope(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF stores Q/K rows for half-split rotary; GGUF llama wants them interleaved (as llama.cpp converts)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(spec: TinyLlamaSpec, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """HF-named tensors renamed (and Q/K permuted) for llama.cpp's `llama` architecture."""
    out = {
        "token_embd.weight": tensors["model.embed_tokens.weight"],
        "output_norm.weight": tensors["model.norm.weight"],
        "output.weight": tensors["lm_head.weight"],
    }
    for layer in range(spec.num_layers):
        for hf_name, gguf_name in _LAYER_NAMES.items():
            w = tensors[f"model.layers.{layer}.{hf_name}"]
            if hf_name.startswith("self_attn.q_proj"):
                w = _permute_rope(w, spec.num_heads)
            elif hf_name.startswith("self_attn.k_proj"):
                w = _permute_rope(w, spec.num_kv_heads)
            out[f"blk.{layer}.{gguf_name}"] = np.ascontiguousarray(w)
    return out


def write_gguf(path: Path, spec: TinyLlamaSpec, tensors: dict[str, np.ndarray], tok: Tokenizer) -> None:
    """One F32 GGUF file with the model, the BPE vocabulary and merges, and the chat template."""
    import gguf

    vocab = tok.get_vocab(with_added_tokens=True)
    n_vocab = tok.get_vocab_size(with_added_tokens=True)
    by_id = {i: t for t, i in vocab.items()}
    tokens = [by_id[i] for i in range(n_vocab)]
    types = [gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL for t in tokens]

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("servetune-tiny-llama")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_context_length(spec.max_position_embeddings)
    w.add_embedding_length(spec.hidden_size)
    w.add_block_count(spec.num_layers)
    w.add_feed_forward_length(spec.intermediate_size)
    w.add_head_count(spec.num_heads)
    w.add_head_count_kv(spec.num_kv_heads)
    w.add_rope_dimension_count(spec.head_dim)
    w.add_rope_freq_base(spec.rope_theta)
    w.add_layer_norm_rms_eps(spec.rms_norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges(tok))
    w.add_bos_token_id(_token_id(tok, END_OF_TEXT))
    w.add_eos_token_id(_token_id(tok, IM_END))
    w.add_pad_token_id(_token_id(tok, END_OF_TEXT))
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    for name, arr in gguf_tensors(spec, tensors).items():
        w.add_tensor(name, arr.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _token_id(tok: Tokenizer, token: str) -> int:
    """The id of a special token the tiny tokenizer always has (an error, not a silent None, if it lost it)."""
    found = tok.token_to_id(token)
    if found is None:
        raise ValueError(f"the tiny tokenizer has no {token!r} token")
    return found
