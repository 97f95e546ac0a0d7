"""Reading a Hugging Face `config.json` into a `ModelSpec`.

The families differ in field names (Mixtral's `num_local_experts`, DeepSeek's `n_routed_experts`, Qwen3.5's
`text_config`); this module maps them onto one set of shapes. A missing field is named in the error, and an
architecture the planner has no formulas for is refused with the list of those it has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servetune.errors import ServetuneError
from servetune.model.bundled import bundled_names
from servetune.model.hub import LocalModel, locate_model
from servetune.model.params import (
    LayerParams,
    ParamCounts,
    attention_params,
    gated_deltanet_params,
    generic_vit_params,
    mla_params,
    mlp_params,
    moe_params,
    qwen_vit_params,
)
from servetune.model.quant import QuantSpec, quant_from_config, quant_from_flag
from servetune.model.spec import (
    AttentionShape,
    LayerKind,
    LinearAttentionShape,
    MLAShape,
    ModelDtype,
    ModelSpec,
    MoEShape,
    VisionShape,
)

SUPPORTED_ARCHITECTURES = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Qwen3NextForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
)
_QKV_BIAS = {"Qwen2ForCausalLM", "Qwen2MoeForCausalLM"}
_QK_NORM = {"Qwen3", "Qwen3Moe", "Qwen3Next", "Qwen3_5", "Qwen3_5Moe"}
_DTYPES: dict[str, ModelDtype] = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "bfloat16",
    "float": "bfloat16",
}


class _Fields:
    """A config dict whose missing fields raise a ServetuneError that names them."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def req(self, *names: str) -> Any:
        for name in names:
            if self.data.get(name) is not None:
                return self.data[name]
        raise ServetuneError(
            f"{self.where} has no {names[0]!r} field" + (f" (nor {', '.join(names[1:])})" if names[1:] else ""),
            f"add {names[0]!r} to the config (copy it from the model's published config.json)",
        )

    def opt(self, name: str, default: Any = None) -> Any:
        value = self.data.get(name)
        return default if value is None else value


def read_config(path: str | Path, *, revision: str | None = None) -> tuple[dict[str, Any], LocalModel]:
    """Loads config.json of a model name: a file, a model directory, a bundled name or a Hugging Face id in the
    local cache (`model.hub` decides which)."""
    model = locate_model(path, revision=revision)
    file = model.config_file
    if not file.is_file():
        raise ServetuneError(
            f"no config.json at {model.path}",
            "pass --model a model directory or a config.json file (no download is done), a Hugging Face id in the "
            "local cache, or a bundled model: " + ", ".join(bundled_names()),
        )
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ServetuneError(
            f"{file} is not valid JSON: {err}", "fix the file or point at the model's config.json"
        ) from err
    if not isinstance(data, dict):
        raise ServetuneError(f"{file} is not a JSON object", "point at the model's config.json")
    return data, model


def load_model_spec(
    path: str | Path,
    *,
    language_model_only: bool | None = None,
    quantization: str | None = None,
    group_size: int | None = None,
    dtype: str | None = None,
    revision: str | None = None,
) -> ModelSpec:
    """Reads a `config.json` (a file, a model directory, a bundled name or a Hugging Face id in the local cache, at
    `revision`) into a ModelSpec.

    `language_model_only` and `quantization` override what the config says, the way vLLM's
    `--language-model-only` and `--quantization` do; `dtype` is vLLM's `--dtype`.
    """
    raw, model = read_config(path, revision=revision)
    file = model.config_file
    archs = raw.get("architectures") or []
    arch = archs[0] if archs else ""
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ServetuneError(
            f"architecture {arch or '(none: config.json has no architectures field)'!r} "
            "is not supported by the planner",
            "supported: " + ", ".join(SUPPORTED_ARCHITECTURES),
        )
    nested = raw.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else raw
    where = f"{file}" + (" text_config" if text is not raw else "")
    f = _Fields(text, where)
    family = arch.removesuffix("ForCausalLM").removesuffix("ForConditionalGeneration")

    hidden = int(f.req("hidden_size"))
    vocab = int(f.req("vocab_size"))
    num_layers = int(f.req("num_hidden_layers"))
    layer_types = _layer_types(f, num_layers)
    attention, mla = _attention(f, arch, family, hidden)
    linear = _linear_attention(f) if "linear_attention" in layer_types else None
    moe, is_moe = _moe(f, family, num_layers)
    intermediate = int(f.opt("intermediate_size", 0))
    if not intermediate and not all(is_moe):
        f.req("intermediate_size")
    tied = bool(raw.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    mtp = int(f.opt("mtp_num_hidden_layers", f.opt("num_nextn_predict_layers", 0)))

    layers = [
        _layer_params(kind, moe_layer, hidden, intermediate, attention, mla, linear, moe)
        for kind, moe_layer in zip(layer_types, is_moe, strict=True)
    ]
    embed = vocab * hidden
    mtp_layer = (
        _layer_params("full_attention", bool(moe), hidden, intermediate, attention, mla, linear, moe) if mtp else None
    )
    mtp_linear = mtp * (2 * hidden * hidden + mtp_layer.linear) if mtp_layer else 0
    mtp_other = mtp * (3 * hidden + mtp_layer.other) if mtp_layer else 0
    vision = _vision(raw, hidden)
    params = ParamCounts(
        embed=embed,
        lm_head=0 if tied else embed,
        layers=layers,
        final_norm=hidden,
        mtp=mtp_linear + mtp_other,
        mtp_linear=mtp_linear,
        mtp_other=mtp_other,
        mtp_layer=mtp_layer,
        vision=vision.params if vision else 0,
    )
    lmo = language_model_only if language_model_only is not None else bool(raw.get("language_model_only", False))
    return ModelSpec(
        name=model.name if model.path.is_dir() else file.stem,
        architecture=arch,
        model_type=str(text.get("model_type", raw.get("model_type", ""))),
        hidden_size=hidden,
        vocab_size=vocab,
        num_layers=num_layers,
        layer_types=layer_types,
        layer_is_moe=is_moe,
        attention=attention,
        mla=mla,
        linear_attention=linear,
        intermediate_size=intermediate,
        moe=moe,
        mtp_layers=mtp,
        tie_word_embeddings=tied,
        max_position_embeddings=_derived_max_len(f),
        rotary_dim=_rotary_dim(f, attention, mla),
        rope_cache_positions=_derived_max_len(f) * (4 if _is_mrope(f) else 1),
        dtype=_dtype(dtype, text, raw),
        vision=vision,
        language_model_only=lmo,
        quant=_quant(quantization, group_size, raw, text),
        params=params,
    )


def _layer_types(f: _Fields, num_layers: int) -> list[LayerKind]:
    types = f.opt("layer_types")
    if types is None and f.opt("full_attention_interval"):
        every = int(f.opt("full_attention_interval"))
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(num_layers)]
    if types is None:
        window = f.opt("sliding_window")
        sliding = window is not None and f.opt("use_sliding_window", True) is not False
        return ["sliding_attention" if sliding else "full_attention"] * num_layers
    if len(types) != num_layers:
        raise ServetuneError(
            f"{f.where}: layer_types has {len(types)} entries but num_hidden_layers is {num_layers}",
            "make layer_types list one kind per layer",
        )
    known = {"full_attention", "linear_attention", "sliding_attention"}
    bad = sorted(set(types) - known)
    if bad:
        raise ServetuneError(f"{f.where}: unknown layer types {bad}", f"layer_types may contain {sorted(known)}")
    return list(types)


def _attention(f: _Fields, arch: str, family: str, hidden: int) -> tuple[AttentionShape | None, MLAShape | None]:
    heads = int(f.req("num_attention_heads"))
    if family.startswith("Deepseek") and f.opt("kv_lora_rank"):
        return None, MLAShape(
            num_heads=heads,
            q_lora_rank=f.opt("q_lora_rank"),
            kv_lora_rank=int(f.req("kv_lora_rank")),
            qk_nope_head_dim=int(f.req("qk_nope_head_dim")),
            qk_rope_head_dim=int(f.req("qk_rope_head_dim")),
            v_head_dim=int(f.req("v_head_dim")),
        )
    head_dim = f.opt("head_dim") or hidden // heads
    window = f.opt("sliding_window") if f.opt("use_sliding_window", True) is not False else None
    return AttentionShape(
        num_heads=heads,
        num_kv_heads=int(f.opt("num_key_value_heads", heads)),
        head_dim=int(head_dim),
        qkv_bias=arch in _QKV_BIAS or bool(f.opt("attention_bias", False)),
        qk_norm=family in _QK_NORM,
        output_gate=bool(f.opt("attn_output_gate", family in ("Qwen3Next",))),
        sliding_window=int(window) if window else None,
    ), None


def _linear_attention(f: _Fields) -> LinearAttentionShape:
    ssm = f.opt("mamba_ssm_dtype")
    return LinearAttentionShape(
        num_k_heads=int(f.req("linear_num_key_heads")),
        num_v_heads=int(f.req("linear_num_value_heads")),
        k_head_dim=int(f.req("linear_key_head_dim")),
        v_head_dim=int(f.req("linear_value_head_dim")),
        conv_kernel=int(f.req("linear_conv_kernel_dim")),
        ssm_dtype=_ssm_dtype(ssm),
    )


def _rotary_dim(f: _Fields, attention: AttentionShape | None, mla: MLAShape | None) -> int:
    """Dimensions RoPE rotates per head (sizes vLLM's cos/sin cache)."""
    if mla is not None:
        return mla.qk_rope_head_dim
    assert attention is not None
    rope = f.opt("rope_parameters") if isinstance(f.opt("rope_parameters"), dict) else {}
    factor = float(f.opt("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0)))
    return int(attention.head_dim * factor)


def _is_mrope(f: _Fields) -> bool:
    """Multimodal RoPE (`mrope_section`): vLLM sizes its cos/sin cache for 4x the positions (video)."""
    for key in ("rope_parameters", "rope_scaling"):
        value = f.opt(key)
        if isinstance(value, dict) and value.get("mrope_section"):
            return True
    return False


def _derived_max_len(f: _Fields) -> int:
    """vLLM's derived max_model_len: max_position_embeddings, times the RoPE scaling factor when the config
    scales it (YaRN scales `original_max_position_embeddings`; su/longrope/llama3 already include it)."""
    base = int(f.req("max_position_embeddings"))
    scaling = f.opt("rope_scaling")
    if not isinstance(scaling, dict) or "factor" not in scaling:
        return base
    kind = scaling.get("rope_type", scaling.get("type", ""))
    if kind in ("su", "longrope", "llama3", "mrope", "default"):
        return base
    if kind == "yarn":
        base = int(scaling.get("original_max_position_embeddings", base))
    return int(base * float(scaling["factor"]))


def _ssm_dtype(value: Any) -> ModelDtype | None:
    """`mamba_ssm_dtype` keeps float32 (unlike weights, the recurrent state is not downcast)."""
    if not value:
        return None
    return "float32" if str(value) == "float32" else _DTYPES.get(str(value))


def _moe(f: _Fields, family: str, num_layers: int) -> tuple[MoEShape | None, list[bool]]:
    experts = f.opt("num_local_experts") or f.opt("n_routed_experts") or f.opt("num_experts")
    if not experts:
        return None, [False] * num_layers
    inter = int(f.req("intermediate_size" if family == "Mixtral" else "moe_intermediate_size"))
    shared = int(f.opt("shared_expert_intermediate_size", 0))
    if f.opt("n_shared_experts"):
        shared = int(f.opt("n_shared_experts")) * inter
    moe = MoEShape(
        num_experts=int(experts),
        top_k=int(f.req("num_experts_per_tok")),
        expert_intermediate=inter,
        shared_intermediate=shared,
        shared_expert_gate=family in ("Qwen2Moe", "Qwen3Next", "Qwen3_5Moe") and shared > 0,
        router_bias=family == "DeepseekV3",
    )
    first_dense = int(f.opt("first_k_dense_replace", 0))
    step = int(f.opt("decoder_sparse_step", 1)) or 1
    dense_only = set(f.opt("mlp_only_layers", []) or [])
    is_moe = [i >= first_dense and i not in dense_only and (i + 1) % step == 0 for i in range(num_layers)]
    return moe, is_moe


def _layer_params(
    kind: LayerKind,
    moe_layer: bool,
    hidden: int,
    intermediate: int,
    attention: AttentionShape | None,
    mla: MLAShape | None,
    linear: LinearAttentionShape | None,
    moe: MoEShape | None,
) -> LayerParams:
    kv = 0
    if kind == "linear_attention":
        assert linear is not None
        mix_linear, mix_other = gated_deltanet_params(
            hidden, linear.num_k_heads, linear.num_v_heads, linear.k_head_dim, linear.v_head_dim, linear.conv_kernel
        )
    elif mla is not None:
        mix_linear, mix_other = mla_params(
            hidden,
            mla.num_heads,
            mla.q_lora_rank,
            mla.kv_lora_rank,
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
            mla.v_head_dim,
        )
    else:
        assert attention is not None
        mix_linear, mix_other, kv = attention_params(
            hidden,
            attention.num_heads,
            attention.num_kv_heads,
            attention.head_dim,
            bias=attention.qkv_bias,
            qk_norm=attention.qk_norm,
            output_gate=attention.output_gate,
        )
    if moe_layer and moe is not None:
        mlp_linear, mlp_other, experts, active = moe_params(
            hidden,
            moe.num_experts,
            moe.top_k,
            moe.expert_intermediate,
            moe.shared_intermediate,
            shared_gate=moe.shared_expert_gate,
            router_bias=moe.router_bias,
        )
    else:
        mlp_linear, mlp_other, experts = mlp_params(hidden, intermediate), 0, 0
        active = mlp_linear
    return LayerParams(
        linear=mix_linear + mlp_linear,
        other=mix_other + mlp_other + 2 * hidden,
        kv_linear=kv,
        experts=experts,
        active_linear=mix_linear + active,
    )


def _vision(raw: dict[str, Any], text_hidden: int) -> VisionShape | None:
    vc = raw.get("vision_config")
    if not isinstance(vc, dict):
        return None
    f = _Fields(vc, "vision_config")
    depth = int(f.opt("depth", f.opt("num_hidden_layers", 0)))
    hidden = int(f.opt("hidden_size", f.opt("embed_dim", 0)))
    inter = int(f.opt("intermediate_size", 4 * hidden))
    if not depth or not hidden:
        return None
    if vc.get("patch_size") and vc.get("spatial_merge_size"):
        params = qwen_vit_params(
            depth,
            hidden,
            inter,
            in_channels=int(f.opt("in_channels", 3)),
            patch=int(vc["patch_size"]),
            temporal_patch=int(f.opt("temporal_patch_size", 1)),
            num_position_embeddings=int(f.opt("num_position_embeddings", 0)),
            merge=int(vc["spatial_merge_size"]),
            out_hidden=int(f.opt("out_hidden_size", text_hidden)),
        )
    else:
        params = generic_vit_params(depth, hidden, inter, text_hidden)
    return VisionShape(depth=depth, hidden_size=hidden, params=params)


def _dtype(flag: str | None, text: dict[str, Any], raw: dict[str, Any]) -> ModelDtype:
    if flag and flag != "auto":
        if flag.lower() not in _DTYPES:
            raise ServetuneError(f"unknown --dtype {flag!r}", "use auto, bfloat16, float16 or float32")
        return _DTYPES[flag.lower()]
    value = text.get("dtype") or text.get("torch_dtype") or raw.get("dtype") or raw.get("torch_dtype") or "bfloat16"
    return _DTYPES.get(str(value).lower(), "bfloat16")


def _quant(flag: str | None, group_size: int | None, raw: dict[str, Any], text: dict[str, Any]) -> QuantSpec:
    if flag:
        return quant_from_flag(flag, group_size)
    qc = raw.get("quantization_config") or text.get("quantization_config")
    if isinstance(qc, dict):
        return quant_from_config(qc)
    return QuantSpec()
