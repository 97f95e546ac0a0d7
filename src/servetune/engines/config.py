"""`EngineConfig`: the identity of one server launch.

Two variants with equal `EngineConfig` share one launch, so it is frozen and hashable, and flags use the
engine's own names (vLLM: `max-model-len`, `kv-cache-dtype`, ...) so that a flag servetune does not model
passes through untouched. Flags are read by the engine vocabulary when a config is built, whatever spelling they
came in (`max_model_len: 32k`, `no-enable-prefix-caching: true`), so every config holds canonical names and typed
values and no later step reads them again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servetune.engines.flagtable import FlagValue
from servetune.engines.vocab import normalize_flags
from servetune.secrets import redact

EngineName = Literal["vllm", "llamacpp", "sglang", "sim"]

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

    @model_validator(mode="before")
    @classmethod
    def _canonical_flags(cls, data: Any) -> Any:
        """The flags under their canonical names with typed values (`engines.vocab.normalize_flags`). A flag no
        table knows is kept as given: refusing it is the job of the command line or file it came from, which
        says how to opt in. What is not a mapping of names is left to pydantic to refuse."""
        if not isinstance(data, dict) or not isinstance(flags := data.get("flags"), Mapping) or not flags:
            return data
        engine, version = data.get("engine", "vllm"), data.get("version")
        if engine not in get_args(EngineName) or not (version is None or isinstance(version, str)):
            return data
        if not all(isinstance(name, str) for name in flags):
            return data
        return {**data, "flags": normalize_flags(engine, flags, version=version, allow_unknown=True)}

    def key(self) -> str:
        """A stable short hash: equal configs launch one server."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def __hash__(self) -> int:
        return hash(self.key())

    def with_flags(self, **changes: FlagValue) -> EngineConfig:
        """A copy with some flags changed (names in any spelling the engine takes, `_` for `-` included)."""
        given = normalize_flags(self.engine, changes, version=self.version, allow_unknown=True)
        return self.model_copy(update={"flags": {**self.flags, **given}})

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
