"""Weight quantization: how many bytes a parameter costs, taken from flags or `quantization_config`.

Only the big linear layers (attention/MLP/expert projections, the Gated-DeltaNet projections) are quantized;
embeddings, lm_head, norms, convolutions and biases stay 16-bit, as AWQ/GPTQ/FP8 checkpoints ship them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError

QuantMethod = Literal["none", "fp8", "int8", "awq", "gptq", "nvfp4"]

SUPPORTED = ("none", "bf16", "fp16", "fp8", "int8", "awq", "gptq", "int4", "w4a16", "nvfp4", "compressed-tensors")


class QuantSpec(BaseModel):
    """How quantized linear weights are stored."""

    model_config = ConfigDict(frozen=True)

    method: QuantMethod = "none"
    weight_bits: int = 16
    group_size: int | None = None
    """Input channels sharing one scale (AWQ/GPTQ); None = per channel."""
    source: str = "model dtype"

    @property
    def bytes_per_linear_param(self) -> float:
        """Bytes per quantized weight, including its share of the scales and zero points.

        Groupwise int4 keeps an fp16 scale and a 4-bit zero per group of `group_size` inputs:
        4 + (16 + 4) / 128 = 4.156 bits at group 128 (what AWQ/GPTQ checkpoints weigh). NVFP4 keeps an FP8
        scale per 16 weights: 4.5 bits.
        """
        if self.method == "none":
            return self.weight_bits / 8
        if self.method == "nvfp4":
            return (4 + 8 / 16) / 8
        if self.group_size:
            return (self.weight_bits + 20 / self.group_size) / 8
        return self.weight_bits / 8

    @property
    def label(self) -> str:
        """Short human label: `bf16`, `fp8`, `awq int4 g128`."""
        if self.method == "none":
            return f"{self.weight_bits}-bit"
        group = f" g{self.group_size}" if self.group_size else ""
        return f"{self.method} int{self.weight_bits}{group}" if self.method in ("awq", "gptq") else self.method

    @property
    def min_compute_capability(self) -> float:
        """Lowest compute capability vLLM's kernels for this method run on (Marlin kernels need 8.0)."""
        return {"none": 0.0, "fp8": 8.0, "int8": 7.5, "awq": 7.5, "gptq": 6.0, "nvfp4": 8.0}[self.method]


def quant_from_flag(name: str, group_size: int | None = None) -> QuantSpec:
    """A `--quantization` value (vLLM's names plus `int4`) as a QuantSpec."""
    key = name.strip().lower().replace("_", "-")
    if key in ("none", "bf16", "bfloat16", "fp16", "float16", "auto"):
        return QuantSpec(source="flag")
    if key in ("nvfp4", "fp4", "modelopt-fp4"):
        return QuantSpec(method="nvfp4", weight_bits=4, group_size=16, source="flag")
    if key in ("fp8", "fbgemm-fp8", "modelopt"):
        return QuantSpec(method="fp8", weight_bits=8, source="flag")
    if key in ("int8", "w8a8", "bitsandbytes-int8", "experts-int8"):
        return QuantSpec(method="int8", weight_bits=8, source="flag")
    if key in ("awq", "awq-marlin", "int4", "w4a16", "compressed-tensors"):
        return QuantSpec(method="awq", weight_bits=4, group_size=group_size or 128, source="flag")
    if key in ("gptq", "gptq-marlin"):
        return QuantSpec(method="gptq", weight_bits=4, group_size=group_size or 128, source="flag")
    raise ServetuneError(
        f"unknown quantization {name!r}",
        f"use one of: {', '.join(SUPPORTED)}",
    )


def quant_from_config(qc: dict[str, Any]) -> QuantSpec:
    """The `quantization_config` block of a HF config.json as a QuantSpec."""
    method = str(qc.get("quant_method", "")).lower()
    if method in ("awq", "gptq"):
        bits = int(qc.get("bits", qc.get("w_bit", 4)))
        group = qc.get("group_size", qc.get("q_group_size", 128))
        group_size = int(group) if group and int(group) > 0 else None
        return QuantSpec(method=method, weight_bits=bits, group_size=group_size, source="quantization_config")  # type: ignore[arg-type]
    if method == "modelopt" and "fp4" in str(qc.get("quant_algo", "")).lower():
        return QuantSpec(method="nvfp4", weight_bits=4, group_size=16, source="quantization_config")
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        return QuantSpec(method="fp8", weight_bits=8, source="quantization_config")
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method in ("bitsandbytes",) and qc.get("load_in_8bit"):
        return QuantSpec(method="int8", weight_bits=8, source="quantization_config")
    raise ServetuneError(
        f"quantization_config has quant_method {method!r}, which the planner does not model",
        "pass --quantization awq|gptq|fp8|int8 to describe the weights, or use an unquantized checkpoint",
    )


def _compressed_tensors(qc: dict[str, Any]) -> QuantSpec:
    """llm-compressor checkpoints: read bits/group size of the first weight scheme."""
    for group in (qc.get("config_groups") or {}).values():
        weights = group.get("weights") or {}
        bits = int(weights.get("num_bits", 8))
        kind = str(weights.get("type", "int"))
        if kind == "float" and bits == 4:
            return QuantSpec(method="nvfp4", weight_bits=4, group_size=16, source="quantization_config")
        if kind == "float" and bits == 8:
            return QuantSpec(method="fp8", weight_bits=8, source="quantization_config")
        if bits == 8:
            return QuantSpec(method="int8", weight_bits=8, source="quantization_config")
        gsize = weights.get("group_size")
        return QuantSpec(
            method="gptq", weight_bits=bits, group_size=int(gsize) if gsize else None, source="quantization_config"
        )
    return QuantSpec(method="int8", weight_bits=8, source="quantization_config")
