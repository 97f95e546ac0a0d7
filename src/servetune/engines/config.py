"""`EngineConfig`: the identity of one server launch.

Two variants with equal `EngineConfig` share one launch, so it is frozen and hashable, and flags use the
engine's own names (vLLM: `max-model-len`, `kv-cache-dtype`, ...) so that a flag servetune does not model
passes through untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from servetune.secrets import redact

EngineName = Literal["vllm", "llamacpp", "sglang", "sim"]
FlagValue = str | int | float | bool | None | dict | list
"""A flag's value: True = bare flag, False = `--no-<flag>` where the engine has one (vLLM), None = leave out,
dict/list = JSON (e.g. vLLM's `speculative-config`)."""

SECRET_ENV: dict[str, dict[str, str]] = {
    "vllm": {"api-key": "VLLM_API_KEY", "hf-token": "HF_TOKEN"},
    "sim": {"api-key": "VLLM_API_KEY", "hf-token": "HF_TOKEN"},
    "llamacpp": {"api-key": "LLAMA_API_KEY", "hf-token": "HF_TOKEN"},
    "sglang": {},
}
"""Secret flags whose value the engine itself also reads from an environment variable (flag → variable): vLLM's
`--api-key` defaults to `$VLLM_API_KEY`, llama-server's to `$LLAMA_API_KEY`, and Hugging Face's hub reads
`$HF_TOKEN`. SGLang reads none. A written command refers to a secret by this variable where there is one."""


def secret_env(engine: str, flag: str) -> str:
    """The environment variable a written command takes a secret flag's value from: the engine's own variable
    (`VLLM_API_KEY`), else the flag's name in capitals after the engine's (`SGLANG_SSL_KEYFILE_PASSWORD`)."""
    prefix = {"llamacpp": "LLAMA", "sim": "VLLM"}.get(engine, engine.upper())
    return SECRET_ENV.get(engine, {}).get(flag) or f"{prefix}_{flag.upper().replace('-', '_')}"


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
        """The key the server will demand, which readiness probes, acceptance checks and load must send:
        `--api-key` (the flag of vLLM, SGLang and llama.cpp alike; vLLM's takes a list, any of which works), else
        the variable the engine reads it from (`SECRET_ENV`) in the config's environment or the one the engine
        inherits from servetune (a systemd EnvironmentFile sets it there)."""
        value = self.flags.get("api-key")
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str) and v), None)
        if isinstance(value, str) and value:
            return value
        var = SECRET_ENV.get(self.engine, {}).get("api-key")
        return (self.env.get(var) or os.environ.get(var) or None) if var else None

    def public(self) -> dict[str, Any]:
        """The config as JSON with every secret value (secret flags, secret-named environment variables) replaced
        by `<redacted>`: what event logs and status files show of it."""
        return redact(self.model_dump(mode="json"))
