"""Random Llama weights with numpy, shaped like a HF `LlamaForCausalLM` checkpoint.

The weights are random, but one trick makes some tokens unreachable: hidden dimension 0 carries a constant that
no layer writes to (its rows of `o_proj`/`down_proj` are zero and its input-norm weight is zero, so no layer
reads it either). After the final norm that dimension is always large and positive, so an `lm_head` row with a
large negative entry there gives that token a hugely negative logit on every step, whatever the context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TinyLlamaSpec:
    """Shape of the tiny model; small enough to start fast, big enough to look like a real Llama."""

    vocab_size: int = 1024
    hidden_size: int = 256
    intermediate_size: int = 704
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 8192
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    seed: int = 20240229

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


BANNED_LOGIT_WEIGHT = -30.0
"""lm_head entry on the constant dimension for banned tokens: their logit stays below -60 even for residual
states far larger than this model produces."""


def random_weights(spec: TinyLlamaSpec, vocab: int, banned: list[int]) -> dict[str, np.ndarray]:
    """All tensors of the model by their HF names, float32, deterministic for a given spec."""
    rng = np.random.default_rng(spec.seed)
    h, i, hd = spec.hidden_size, spec.intermediate_size, spec.head_dim

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    embed = normal(vocab, h)
    embed[:, 0] = 1.0
    tensors: dict[str, np.ndarray] = {"model.embed_tokens.weight": embed}
    for layer in range(spec.num_layers):
        p = f"model.layers.{layer}."
        norm_in = np.ones(h, np.float32)
        norm_in[0] = 0.0
        o_proj = normal(h, spec.num_heads * hd)
        o_proj[0, :] = 0.0
        down = normal(h, i)
        down[0, :] = 0.0
        tensors |= {
            p + "input_layernorm.weight": norm_in,
            p + "self_attn.q_proj.weight": normal(spec.num_heads * hd, h),
            p + "self_attn.k_proj.weight": normal(spec.num_kv_heads * hd, h),
            p + "self_attn.v_proj.weight": normal(spec.num_kv_heads * hd, h),
            p + "self_attn.o_proj.weight": o_proj,
            p + "post_attention_layernorm.weight": norm_in.copy(),
            p + "mlp.gate_proj.weight": normal(i, h),
            p + "mlp.up_proj.weight": normal(i, h),
            p + "mlp.down_proj.weight": down,
        }
    lm_head = normal(vocab, h, std=0.1)
    lm_head[:, 0] = 0.0
    lm_head[banned, 0] = BANNED_LOGIT_WEIGHT
    tensors["model.norm.weight"] = np.ones(h, np.float32)
    tensors["lm_head.weight"] = lm_head
    return tensors
