"""Parameter counts reproduce the published checkpoint sizes (from each model's public config shapes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.model.hf_config import load_model_spec
from servetune.model.spec import ModelSpec
from servetune.plan.memory import weights_per_gpu


@pytest.mark.parametrize(
    ("name", "language_model", "published"),
    [
        ("llama-3-8b", 8_030_261_248, "8.03B"),
        ("qwen3-32b", 32_762_123_264, "32.8B"),
        ("mixtral-8x7b", 46_702_792_704, "46.7B"),
        ("qwen2-7b", 7_615_616_512, "7.62B"),
        ("qwen3-14b", 14_768_307_200, "14.8B"),
        ("qwen3-30b-a3b", 30_532_122_624, "30.5B"),
        ("deepseek-v3", 671_026_419_200, "671B (+ MTP = 685B)"),
    ],
)
def test_language_model_params_match_published_sizes(name: str, language_model: int, published: str) -> None:
    assert load_model_spec(name).params.language_model == language_model, published


def test_qwen36_27b_language_model_vision_and_mtp() -> None:
    p = load_model_spec("qwen3.6-27b").params
    assert round(p.language_model / 1e9, 2) == 26.90  # the figure
    assert p.mtp == 424_699_392  # MTP head: fc + norms + one full-attention decoder layer
    assert p.vision == 460_730_096  # 27-block ViT + patch/pos embed + merger
    assert round(p.total / 1e9, 2) == 27.78  # safetensors index total_size 55.56 GB / 2 bytes


def weights(spec: ModelSpec) -> int:
    """The planner's weights on one GPU without parallelism (the one weights formula: `plan.memory`)."""
    return weights_per_gpu(spec, tp=1, pp=1, with_mtp=False)


def test_language_model_only_drops_the_vision_tower() -> None:
    full = load_model_spec("qwen3.5-27b", language_model_only=False)
    lmo = load_model_spec("qwen3.5-27b", language_model_only=True)
    assert weights(full) - weights(lmo) == 2 * full.params.vision
    # 50.10 GiB of bf16 weights + the MRoPE cos/sin cache vLLM counts as model memory (4 x 262,144 x 64 x 2 B)
    assert round(weights(lmo) / 1024**3, 2) == 50.22


def test_int4_weights_keep_embeddings_16_bit() -> None:
    spec = load_model_spec("qwen3.6-27b", language_model_only=True, quantization="awq")
    assert spec.quant.group_size == 128
    # 4 + 20/128 bits per quantized weight; embeddings, lm_head, norms, conv stay 16-bit: 17.8 GB (GPTQ cards),
    # + the 0.13 GB MRoPE cache
    assert round(weights(spec) / 1e9, 1) == 17.9


def test_quantization_config_is_read() -> None:
    spec = load_model_spec("deepseek-v3")
    assert spec.quant.method == "fp8" and spec.quant.source == "quantization_config"
    assert spec.mla is not None and spec.mla.cache_dim == 576


def test_hybrid_and_moe_shapes() -> None:
    q36 = load_model_spec("qwen3.6-27b")
    assert (q36.num_full_attention_layers, q36.num_linear_layers, q36.mtp_layers) == (16, 48, 1)
    nxt = load_model_spec("qwen3-next-80b-a3b")
    assert nxt.is_hybrid and nxt.moe is not None and nxt.moe.num_experts == 512
    assert nxt.params.active_per_token < nxt.params.language_model / 20  # ~3B active of 80B


CONFIGS = Path(__file__).parent / "configs"


@pytest.mark.parametrize(
    ("file", "params", "published"),
    [
        ("mistral-7b-v0.1.json", 7_241_732_096, "7.24B"),
        ("deepseek-v2-lite.json", 15_706_484_224, "15.7B (MLA without q_lora, 2 shared experts)"),
        ("llama-3.2-1b.json", 1_235_814_400, "1.24B (tied embeddings)"),
    ],
)
def test_more_families(file: str, params: int, published: str) -> None:
    spec = load_model_spec(CONFIGS / file)
    assert spec.params.total == params, published


def test_rope_scaling_and_sliding_window() -> None:
    assert load_model_spec(CONFIGS / "llama-3.2-1b.json").max_position_embeddings == 131072  # llama3 type: as is
    mistral = load_model_spec(CONFIGS / "mistral-7b-v0.1.json")
    assert set(mistral.layer_types) == {"sliding_attention"} and mistral.attention.sliding_window == 4096  # type: ignore[union-attr]
