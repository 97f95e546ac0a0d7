"""`EngineConfig`: the identity of one server launch.

Two variants with equal `EngineConfig` share one launch, so it is frozen and hashable, and flags use the
engine's own names (vLLM: `max-model-len`, `kv-cache-dtype`, ...) so that a flag servetune does not model
passes through untouched.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EngineName = Literal["vllm", "llamacpp", "sglang", "sim"]
FlagValue = str | int | float | bool | None | dict | list
"""A flag's value: True = bare flag, False = `--no-<flag>` where the engine has one (vLLM), None = leave out,
dict/list = JSON (e.g. vLLM's `speculative-config`)."""


class EngineConfig(BaseModel):
    """What to launch: engine, model, flags by the engine's own names, environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: EngineName = "vllm"
    model: str = Field(description="Model path (or id) as the engine takes it.")
    served_model_name: str | None = Field(default=None, description="Name clients use; defaults to model.")
    flags: dict[str, FlagValue] = Field(default_factory=dict, description="Engine flags without leading dashes.")
    env: dict[str, str] = Field(default_factory=dict)
    version: str | None = Field(default=None, description="Engine version, when known.")

    def key(self) -> str:
        """A stable short hash: equal configs launch one server."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def __hash__(self) -> int:
        return hash(self.key())

    def with_flags(self, **changes: FlagValue) -> EngineConfig:
        """A copy with some flags changed (names may use `_` for `-`)."""
        flags = dict(self.flags)
        for name, value in changes.items():
            flags[name.replace("_", "-")] = value
        return self.model_copy(update={"flags": flags})

    @property
    def name(self) -> str:
        """The model name clients send."""
        return self.served_model_name or self.model

    @property
    def api_key(self) -> str | None:
        """The key the server will demand (`--api-key`, the flag of vLLM, SGLang and llama.cpp alike): readiness
        probes, acceptance checks and load must send it."""
        value = self.flags.get("api-key")
        return value if isinstance(value, str) and value else None
