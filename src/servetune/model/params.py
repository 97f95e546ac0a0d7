"""Parameter counts from shapes, the way the checkpoints store them.

Each layer is split into `linear` (the projections a quantization method compresses and tensor parallelism
shards) and `other` (norms, conv weights, gates' small vectors, biases: kept 16-bit, mostly replicated).
The formulas follow vLLM's model files (llama.py, qwen2/3.py, qwen3_moe.py, qwen3_next.py, qwen3_5.py,
deepseek_v2.py, mixtral.py) and reproduce the published checkpoint sizes (tests/model).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class LayerParams(BaseModel):
    """One decoder layer's parameters."""

    model_config = ConfigDict(frozen=True)

    linear: int
    """Quantizable projections (attention, MLP, experts, GDN in/out projections)."""
    other: int
    """Norms, conv taps, gate vectors, biases: kept in the model dtype."""
    kv_linear: int = 0
    """The k/v projections inside `linear` (replicated when TP exceeds the KV heads)."""
    experts: int = 0
    """Routed-expert weights inside `linear` (only top_k of num_experts are read per token)."""
    active_linear: int = 0
    """`linear` a single token actually multiplies (routed experts counted top_k times)."""

    @property
    def total(self) -> int:
        """All parameters of the layer."""
        return self.linear + self.other


class ParamCounts(BaseModel):
    """Parameter counts of a model, by component."""

    model_config = ConfigDict(frozen=True)

    embed: int
    lm_head: int
    """0 when tied to the embedding."""
    layers: list[LayerParams]
    final_norm: int
    mtp: int = 0
    mtp_linear: int = 0
    mtp_other: int = 0
    mtp_layer: LayerParams | None = None
    """The decoder layer inside the MTP head (drafting streams it once per proposal)."""
    vision: int = 0

    @property
    def body_linear(self) -> int:
        """Quantizable parameters of the decoder stack."""
        return sum(layer.linear for layer in self.layers)

    @property
    def body_other(self) -> int:
        """Non-quantizable parameters of the decoder stack, final norm included."""
        return sum(layer.other for layer in self.layers) + self.final_norm

    @property
    def body(self) -> int:
        """Decoder stack (all layers + final norm)."""
        return self.body_linear + self.body_other

    @property
    def language_model(self) -> int:
        """What `--language-model-only` loads: embeddings, decoder, lm_head."""
        return self.embed + self.lm_head + self.body

    @property
    def total(self) -> int:
        """The whole checkpoint: language model, MTP head and vision tower."""
        return self.language_model + self.mtp + self.vision

    @property
    def active_per_token(self) -> int:
        """Parameters one token multiplies in a forward pass (2 FLOPs each): MoE counts top_k experts."""
        active = sum(layer.active_linear + layer.other for layer in self.layers)
        return active + self.lm_head_or_embed

    @property
    def lm_head_or_embed(self) -> int:
        """The output projection's size (the embedding when tied)."""
        return self.lm_head or self.embed


def attention_params(
    hidden: int, heads: int, kv_heads: int, head_dim: int, *, bias: bool, qk_norm: bool, output_gate: bool
) -> tuple[int, int, int]:
    """(linear, other, kv_linear) of a GQA attention block."""
    q = hidden * heads * head_dim * (2 if output_gate else 1)
    kv = 2 * hidden * kv_heads * head_dim
    o = heads * head_dim * hidden
    other = (heads * head_dim + 2 * kv_heads * head_dim if bias else 0) + (2 * head_dim if qk_norm else 0)
    return q + kv + o, other, kv


def mla_params(
    hidden: int, heads: int, q_lora: int | None, kv_lora: int, nope: int, rope: int, v_dim: int
) -> tuple[int, int]:
    """(linear, other) of a DeepSeek MLA block (q_a/q_b or q_proj, kv_a_with_mqa, kv_b, o)."""
    qk_dim = nope + rope
    if q_lora:
        q_linear, q_other = hidden * q_lora + q_lora * heads * qk_dim, q_lora
    else:
        q_linear, q_other = hidden * heads * qk_dim, 0
    kv_linear = hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim)
    return q_linear + kv_linear + heads * v_dim * hidden, q_other + kv_lora


def gated_deltanet_params(
    hidden: int, k_heads: int, v_heads: int, k_dim: int, v_dim: int, conv_kernel: int
) -> tuple[int, int]:
    """(linear, other) of a Gated-DeltaNet block: in_proj qkv+z, in_proj b/a, conv1d, A_log, dt_bias, norm, out."""
    key, value = k_heads * k_dim, v_heads * v_dim
    linear = hidden * (2 * key + value) + hidden * value + value * hidden
    conv_dim = 2 * key + value
    other = 2 * hidden * v_heads + conv_dim * conv_kernel + 2 * v_heads + v_dim
    return linear, other


def mlp_params(hidden: int, intermediate: int) -> int:
    """SwiGLU MLP (gate, up, down)."""
    return 3 * hidden * intermediate


def moe_params(
    hidden: int, experts: int, top_k: int, expert_inter: int, shared_inter: int, *, shared_gate: bool, router_bias: bool
) -> tuple[int, int, int, int]:
    """(linear, other, routed experts, active linear) of a MoE MLP; the router counts as `other`."""
    routed = experts * mlp_params(hidden, expert_inter)
    shared = mlp_params(hidden, shared_inter) if shared_inter else 0
    other = hidden * experts + (experts if router_bias else 0) + (hidden if shared_gate else 0)
    active = top_k * mlp_params(hidden, expert_inter) + shared
    return routed + shared, other, routed, active


def qwen_vit_params(
    depth: int,
    hidden: int,
    intermediate: int,
    *,
    in_channels: int,
    patch: int,
    temporal_patch: int,
    num_position_embeddings: int,
    merge: int,
    out_hidden: int,
) -> int:
    """Qwen3-VL/Qwen3.5 vision tower: patch embed, learned positions, ViT blocks, patch merger."""
    block = 4 * hidden * hidden + 4 * hidden + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    patch_embed = in_channels * temporal_patch * patch * patch * hidden + hidden
    merged = hidden * merge * merge
    merger = 2 * hidden + merged * merged + merged + merged * out_hidden + out_hidden
    return depth * block + patch_embed + num_position_embeddings * hidden + merger


def generic_vit_params(depth: int, hidden: int, intermediate: int, out_hidden: int) -> int:
    """A plain ViT with an MLP projector, for vision towers without a dedicated formula (estimate)."""
    block = 4 * hidden * hidden + 4 * hidden + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    return depth * block + hidden * out_hidden + out_hidden * out_hidden
