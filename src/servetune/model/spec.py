"""`ModelSpec`: what the planner needs to know about a model, read from a Hugging Face `config.json`.

The spec keeps the shapes (layers by kind, heads, dims, experts, MTP, vision tower) and the parameter
counts derived from them; bytes follow from the counts and the quantization. Everything is per model, not
per GPU: sharding is the plan room's business.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from servetune.model.params import ParamCounts
from servetune.model.quant import QuantSpec

LayerKind = Literal["full_attention", "linear_attention", "sliding_attention"]
ModelDtype = Literal["bfloat16", "float16", "float32"]


class AttentionShape(BaseModel):
    """Softmax attention (GQA/MHA) of one layer."""

    model_config = ConfigDict(frozen=True)

    num_heads: int
    num_kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    qk_norm: bool = False
    output_gate: bool = False
    """Qwen3.5/Qwen3-Next gated attention: q_proj also emits a gate (2x query width)."""
    sliding_window: int | None = None


class MLAShape(BaseModel):
    """DeepSeek multi-head latent attention: the KV cache holds one latent + rope key per token."""

    model_config = ConfigDict(frozen=True)

    num_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def cache_dim(self) -> int:
        """Elements cached per token per layer (vLLM's MLA head_size): latent + rope key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class LinearAttentionShape(BaseModel):
    """Gated DeltaNet (Qwen3.5/3.6, Qwen3-Next): a fixed-size recurrent state per sequence."""

    model_config = ConfigDict(frozen=True)

    num_k_heads: int
    num_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int
    ssm_dtype: ModelDtype | None = None
    """Dtype of the recurrent (temporal) state when the config pins it (`mamba_ssm_dtype`)."""

    @property
    def conv_dim(self) -> int:
        """Channels of the causal conv (q, k and v concatenated)."""
        return 2 * self.num_k_heads * self.k_head_dim + self.num_v_heads * self.v_head_dim


class MoEShape(BaseModel):
    """Mixture of experts in the MLP of the sparse layers."""

    model_config = ConfigDict(frozen=True)

    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int = 0
    shared_expert_gate: bool = False
    router_bias: bool = False


class VisionShape(BaseModel):
    """The vision tower, counted for weights and skipped with `language_model_only`."""

    model_config = ConfigDict(frozen=True)

    depth: int
    hidden_size: int
    params: int


class ModelSpec(BaseModel):
    """A model's shapes, parameter counts and weight format, as the planner uses them."""

    model_config = ConfigDict(frozen=True)

    name: str
    architecture: str
    model_type: str
    hidden_size: int
    vocab_size: int
    num_layers: int
    layer_types: list[LayerKind]
    layer_is_moe: list[bool]
    attention: AttentionShape | None = None
    mla: MLAShape | None = None
    linear_attention: LinearAttentionShape | None = None
    intermediate_size: int
    moe: MoEShape | None = None
    mtp_layers: int = 0
    tie_word_embeddings: bool = False
    max_position_embeddings: int
    rotary_dim: int = 0
    """RoPE dimensions per head (head_dim x partial_rotary_factor; the rope part of the key for MLA)."""
    rope_cache_positions: int = 0
    """Rows of vLLM's cos/sin cache: max_position_embeddings, x4 for multimodal RoPE (MRotaryEmbedding)."""
    dtype: ModelDtype = "bfloat16"
    vision: VisionShape | None = None
    language_model_only: bool = False
    quant: QuantSpec = Field(default_factory=QuantSpec)
    params: ParamCounts

    @property
    def num_full_attention_layers(self) -> int:
        """Layers whose KV cache grows with the context (full or sliding softmax attention)."""
        return sum(1 for k in self.layer_types if k != "linear_attention")

    @property
    def num_linear_layers(self) -> int:
        """Gated-DeltaNet layers (fixed-size state)."""
        return sum(1 for k in self.layer_types if k == "linear_attention")

    @property
    def is_hybrid(self) -> bool:
        """True when some layers keep a recurrent state instead of a KV cache (vLLM's `is_hybrid`)."""
        return self.num_linear_layers > 0

    @property
    def is_multimodal(self) -> bool:
        """True when the checkpoint has a vision tower."""
        return self.vision is not None

    @property
    def num_attention_heads(self) -> int:
        """Query heads (softmax or MLA)."""
        if self.mla:
            return self.mla.num_heads
        assert self.attention is not None
        return self.attention.num_heads

    def loaded_params(self, *, with_mtp: bool = False) -> int:
        """Parameters vLLM loads: language model, + vision unless language-model-only, + MTP when drafting."""
        total = self.params.language_model
        if self.vision and not self.language_model_only:
            total += self.params.vision
        if with_mtp:
            total += self.params.mtp
        return total
