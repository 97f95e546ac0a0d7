"""What path an engine gets for a model name: `tiny` (servetune's tiny random Llama: its GGUF for llama.cpp, its
HF folder for vLLM, SGLang and the simulator) or the name as given."""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.tiny.cache import tiny_model

TINY = "tiny"
"""Model name that stands for servetune's tiny random Llama (built on first use)."""


def resolve_model(config: EngineConfig) -> EngineConfig:
    """Replaces the `tiny` model name with the built tiny model's path for the config's engine."""
    if config.model != TINY:
        return config
    tiny = tiny_model()
    path = tiny.gguf_path if config.engine == "llamacpp" else tiny.hf_dir
    return config.model_copy(
        update={"model": str(path), "served_model_name": config.served_model_name or tiny.served_name}
    )


def resolve_tokenizer(tokenizer: str | None) -> str | None:
    """`tiny` as a tokenizer means the tiny model's tokenizer.json."""
    return str(tiny_model().tokenizer_json) if tokenizer == TINY else tokenizer
