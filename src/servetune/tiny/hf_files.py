"""Writes the tiny model as a Hugging Face model directory (what vLLM and SGLang load)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from servetune.tiny.tokenizer import CHAT_TEMPLATE, END_OF_TEXT, IM_END, IM_START
from servetune.tiny.weights import TinyLlamaSpec


def write_hf(out: Path, spec: TinyLlamaSpec, tensors: dict[str, np.ndarray], tok: Tokenizer) -> None:
    """config.json, model.safetensors, tokenizer.json, tokenizer_config.json, generation_config.json."""
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    eos_id, im_end_id = tok.token_to_id(END_OF_TEXT), tok.token_to_id(IM_END)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": spec.rms_norm_eps,
        "rope_theta": spec.rope_theta,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": eos_id,
        "eos_token_id": im_end_id,
        "torch_dtype": "float32",
    }
    _write_json(out / "config.json", config)
    _write_json(
        out / "generation_config.json",
        {"bos_token_id": eos_id, "eos_token_id": [im_end_id, eos_id], "do_sample": False},
    )
    added = {
        str(tok.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in (END_OF_TEXT, IM_START, IM_END)
    }
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "added_tokens_decoder": added,
            "bos_token": None,
            "eos_token": IM_END,
            "pad_token": END_OF_TEXT,
            "unk_token": None,
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": spec.max_position_embeddings,
            "chat_template": CHAT_TEMPLATE,
        },
    )
    _write_json(out / "special_tokens_map.json", {"eos_token": IM_END, "pad_token": END_OF_TEXT})
    tok.save(str(out / "tokenizer.json"))
    save_file(
        {k: np.ascontiguousarray(v) for k, v in tensors.items()},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")
