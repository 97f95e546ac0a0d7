"""The `tiny` model name: servetune's tiny random Llama, built on first use, resolved per engine."""

from __future__ import annotations

from pathlib import Path

from servetune.engines.config import EngineConfig

TINY = "tiny"
"""Model name that stands for servetune's tiny random Llama (built on first use): its GGUF for llama.cpp,
its HF folder for vLLM."""


def tiny_dir() -> Path:
    import os

    return Path(os.environ.get("SERVETUNE_CACHE", Path.home() / ".cache" / "servetune")) / "tiny-model"


def resolve_model(config: EngineConfig) -> EngineConfig:
    """Replaces the `tiny` model name with the built tiny model's path for the config's engine."""
    if config.model != TINY:
        return config
    from servetune.tiny.build import build_tiny_model

    tiny = build_tiny_model(tiny_dir())
    path = tiny.gguf_path if config.engine == "llamacpp" else tiny.hf_dir
    return config.model_copy(
        update={"model": str(path), "served_model_name": config.served_model_name or tiny.served_name}
    )


def resolve_tokenizer(tokenizer: str | None) -> str | None:
    if tokenizer != TINY:
        return tokenizer
    from servetune.tiny.build import build_tiny_model

    return str(build_tiny_model(tiny_dir()).tokenizer_json)
