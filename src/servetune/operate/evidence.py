"""A number and where it came from (`Sized`), and the measurements that come with a served config (`Evidence`):
what serve and deploy size their settings from, so every generated number can say its source."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field


class Sized(BaseModel):
    """A number and where it came from."""

    model_config = ConfigDict(frozen=True)

    value: float
    source: str

    @property
    def int(self) -> int:
        return math.ceil(self.value)

    def __str__(self) -> str:
        return f"{self.value:g} ({self.source})"


class Evidence(BaseModel):
    """Measurements that came with a config (empty for a bare config: then the running engine measures)."""

    model_config = ConfigDict(frozen=True)

    origin: str
    cold_starts_s: dict[str, float] = Field(default_factory=dict, description="launch_s by variant name")
    longest_request: Sized | None = None
    p99_ttft: Sized | None = None
    p99_tpot: Sized | None = None
    slos: dict[str, float] = Field(default_factory=dict)
    max_model_len: Sized | None = None
    max_concurrency: Sized | None = None
    """Requests of max_model_len that fit in the KV cache at once (engine's startup facts)."""
    saturation_concurrency: Sized | None = None
    gpu: str | None = None
    gpu_count: int = 1

    def cold_start(self) -> Sized | None:
        """The longest measured cold start (all variants of the run started the same model on the same box)."""
        if not self.cold_starts_s:
            return None
        name, value = max(self.cold_starts_s.items(), key=lambda kv: kv[1])
        listed = ", ".join(f"{k} {v:.3g} s" for k, v in sorted(self.cold_starts_s.items()))
        return Sized(value=value, source=f"measured launch_s in {self.origin} (longest: {name}; all: {listed})")
