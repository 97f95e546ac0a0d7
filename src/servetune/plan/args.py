"""The plan room's commands' arguments: `PlanArgs` (`servetune plan`) and `PlanSeedsArgs` (`servetune
plan-seeds`), each the one owner of its flags, defaults, units and bounds. The commands' options are generated
from these fields, so this module stays light (pydantic only); `plan/command.py` does what they ask."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from servetune.errors import ServetuneError

ENGINE_WORDS: dict[str, JsonValue] = {"rest": True}
"""A field that takes a command's engine flags (the words after the known options, by the engine's own names)."""


class PlanArgs(BaseModel):
    """Everything `servetune plan` takes: a model, the GPUs, and `vllm serve`'s own flags after the options."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    model: str = Field(description="Model directory or config.json (or a bundled name, e.g. qwen3.6-27b)")
    gpu: str = Field(
        "local",
        description="GPU model and count: A100-80G-SXMx2, H200, 2xL40S, local (NVML), custom:mem=..,bw=..,tflops=..",
    )
    vllm_version: str | None = Field(None, description="vLLM release to follow (0.11 to 0.33; latest by default)")
    available_kv: str | None = Field(
        None,
        description="Measured 'Available KV cache memory', in GiB as vLLM logs it (71.16) or bytes (≥ 2^20): "
        "skips the overhead model",
    )
    from_log: Path | None = Field(
        None,
        description="A vLLM startup log: reproduce its capacity lines from its 'Available KV cache memory' (flags "
        "from its 'non-default args' line unless given here) and compare the overhead model with it",
    )
    as_json: bool = Field(False, description="Print the plan as JSON", json_schema_extra={"flags": ["--json"]})
    show_config: bool = Field(
        False, description="Print the engine config and GPUs servetune read from the arguments, and stop"
    )
    pass_unknown_flags: bool = Field(
        False, description="Pass flags missing from servetune's vLLM table on untouched (known flags are checked)"
    )
    engine_flags: tuple[str, ...] = Field((), description="vllm serve's flags", json_schema_extra=ENGINE_WORDS)

    @field_validator("available_kv")
    @classmethod
    def _size(cls, text: str | None) -> str | None:
        if text is not None:
            available_bytes(text)
        return text

    def available_kv_bytes(self) -> int | None:
        return available_bytes(self.available_kv) if self.available_kv is not None else None


def available_bytes(text: str) -> int:
    """`71.16` / `71.16GiB` (GiB, as vLLM logs it) or a plain byte count (≥ 2^20)."""
    raw = text.strip().lower().replace(" ", "").removesuffix("gib")
    try:
        value = float(raw)
    except ValueError as err:
        raise ServetuneError(
            f"--available-kv {text!r} is not a number", "give GiB as vLLM logs it (71.16) or bytes"
        ) from err
    if not 0 < value < 2**60:  # NaN and infinities fail this too
        raise ServetuneError(f"--available-kv {text!r} is not a positive size", "give GiB (71.16) or bytes")
    return int(value) if value >= 2**20 else round(value * 1024**3)


class PlanSeedsArgs(BaseModel):
    """What `servetune plan-seeds` prints of the five seed systems."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    detail: bool = Field(False, description="Print every plan in full")
    as_json: bool = Field(False, description="Print the plans as JSON", json_schema_extra={"flags": ["--json"]})
