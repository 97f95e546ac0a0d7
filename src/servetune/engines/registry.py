"""Engine name → adapter."""

from __future__ import annotations

from servetune.engines.adapter import EngineAdapter
from servetune.engines.config import EngineName


def adapter_for(engine: EngineName | str) -> EngineAdapter:
    """The adapter for an engine name (vllm, llamacpp, sglang, sim)."""
    from servetune.engines.llamacpp import LlamaCppAdapter
    from servetune.engines.sglang import SglangAdapter
    from servetune.engines.sim import SimAdapter
    from servetune.engines.vllm import VllmAdapter
    from servetune.errors import ServetuneError

    adapters: dict[str, type[EngineAdapter]] = {
        "vllm": VllmAdapter,
        "llamacpp": LlamaCppAdapter,
        "sglang": SglangAdapter,
        "sim": SimAdapter,
    }
    if engine not in adapters:
        raise ServetuneError(f"unknown engine {engine!r}", f"use one of: {', '.join(adapters)}")
    return adapters[engine]()
