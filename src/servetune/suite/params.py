"""The suite's settings: how it talks to the server (`ClientSpec`) and each probe's parameters.

They live in the suite room because the probes take them; the experiment file embeds them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PROBES = (
    "acceptance",
    "short_latency",
    "decode_speed",
    "long_prefill",
    "prefix_reuse",
    "memory_headroom",
    "long_generation",
    "load_curve",
)
"""The suite's probes in the order they run (cheap and diagnostic first, the load curve last)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientSpec(_Strict):
    """How the suite talks to the server (the same for every variant unless a variant overrides it)."""

    endpoint: Literal["chat", "completions"] = "chat"
    stream: bool = True
    api_key: str | None = None
    sampling: str | None = Field(default=None, description="Name of a sampling preset used for every request.")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Fields added to every request body.")
    tokenizer: str | None = Field(default=None, description="tokenizer.json for exact prompt lengths.")
    request_timeout_s: float = Field(default=600.0, gt=0)


class ShortLatency(_Strict):
    prompt: str = "Hello"
    max_tokens: int = Field(default=32, ge=1)


class DecodeSpeed(_Strict):
    output_tokens: int = Field(default=512, ge=2)


class LongPrefill(_Strict):
    prompt_tokens: int = Field(default=24000, ge=16, description="Capped at max_model_len minus the output.")
    max_tokens: int = Field(default=16, ge=1)


class PrefixReuse(_Strict):
    system_tokens: int = Field(default=4000, ge=16)
    max_tokens: int = Field(default=16, ge=1)


class MemoryHeadroom(_Strict):
    pass


class LongGeneration(_Strict):
    output_tokens: int = Field(default=2048, ge=2)
    only_when_changed: list[str] = Field(
        default_factory=list,
        description="Run only on the baseline and on variants that change one of these flags "
        "(seed 001 ran its 2048-token test only where the MTP setting changed).",
    )


class LoadCurve(_Strict):
    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16], min_length=1)
    requests_per_point: int = Field(default=32, ge=1)
    input_tokens: int = Field(default=512, ge=1)
    output_tokens: int = Field(default=128, ge=1)
    stop_at_saturation: bool = Field(default=True, description="Stop when throughput stops rising (< 5% gain).")

    @field_validator("concurrency")
    @classmethod
    def _positive_increasing(cls, value: list[int]) -> list[int]:
        if any(c < 1 for c in value) or sorted(set(value)) != value:
            raise ValueError("concurrency must be positive and strictly increasing, e.g. [1, 2, 4, 8]")
        return value


class Acceptance(_Strict):
    long_context_tokens: int | None = Field(default=None, ge=16, description="Default: half of max_model_len.")


class Probes(_Strict):
    """Which probes run, each with its own settings (null = the defaults)."""

    acceptance: Acceptance | None = None
    short_latency: ShortLatency | None = None
    decode_speed: DecodeSpeed | None = None
    long_prefill: LongPrefill | None = None
    prefix_reuse: PrefixReuse | None = None
    memory_headroom: MemoryHeadroom | None = None
    long_generation: LongGeneration | None = None
    load_curve: LoadCurve | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_means_defaults(cls, data: Any) -> Any:
        # `decode_speed:` with nothing after it (YAML null) means "run it with its defaults".
        if isinstance(data, dict):
            return {k: ({} if v is None else v) for k, v in data.items()}
        if isinstance(data, list):
            return {name: {} for name in data}
        return data

    def enabled(self) -> list[str]:
        return [name for name in PROBES if getattr(self, name) is not None]
