"""Secrets never written in clear: API keys and secret-looking environment values are replaced by a reference.

Whatever servetune writes while it operates an engine (event log, status, deployment files) passes through a
`Redactor` built from the engine config: the values of `api-key` flags and of environment variables whose names
look secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`) are replaced by `$NAME` references, so a file can be
shared or committed and the secret comes from the environment at run time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from servetune.engines.config import EngineConfig
from servetune.secrets import is_secret_flag, is_secret_name

SECRET_FLAGS = ("api-key", "api_key", "hf-token", "hf_token")
API_KEY_ENV = "SERVETUNE_ENGINE_API_KEY"
"""Where deployment files take an engine's `--api-key` from (the value itself is never written)."""

__all__ = ["API_KEY_ENV", "SECRET_FLAGS", "Redactor", "is_secret_name", "public_config", "secret_values"]


def secret_values(cfg: EngineConfig) -> dict[str, str]:
    """The config's secret values, each with the reference that replaces it (what is secret: `servetune.secrets`)."""
    found: dict[str, str] = {}
    for name, value in cfg.flags.items():
        if is_secret_flag(name) and isinstance(value, str) and value:
            found[value] = f"${API_KEY_ENV}"
    for name, value in cfg.env.items():
        if is_secret_name(name) and value:
            found[value] = f"${name}"
    return found


class Redactor:
    """Replaces known secret values in text and in JSON-like data (longest first, so no partial leak)."""

    def __init__(self, configs: Iterable[EngineConfig] = ()) -> None:
        self._values: dict[str, str] = {}
        for cfg in configs:
            self.add(cfg)

    def add(self, cfg: EngineConfig) -> None:
        """Learns the secrets of one more config (a switch or a fallback brings new ones)."""
        self._values.update(secret_values(cfg))

    def text(self, value: str) -> str:
        for secret in sorted(self._values, key=len, reverse=True):
            if len(secret) >= 4:  # a 1-3 character "secret" would shred ordinary text
                value = value.replace(secret, self._values[secret])
        return value

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def public_config(cfg: EngineConfig) -> dict[str, Any]:
    """The config as JSON with secrets replaced by references (for events, status and files)."""
    return Redactor([cfg]).data(cfg.model_dump(mode="json"))
