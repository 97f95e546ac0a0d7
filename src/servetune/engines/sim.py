"""`sim`: servetune's own simulated vLLM, launched and parsed exactly like vLLM.

`servetune sim-serve` takes vLLM's flag names and prints vLLM-shaped startup lines, so the vLLM log parser and
failure patterns apply unchanged; only the command differs.
"""

from __future__ import annotations

import sys

import servetune
from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.vllm import VllmAdapter, parse_vllm_log
from servetune.engines.vocab import to_argv


class SimAdapter(VllmAdapter):
    """The simulator: vLLM's conventions, servetune's process."""

    name = "sim"

    def argv(self, cfg: EngineConfig, host: str, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "servetune",
            "sim-serve",
            "--model",
            cfg.model,
            "--served-model-name",
            cfg.name,
            "--host",
            host,
            "--port",
            str(port),
            *to_argv(cfg.engine, cfg.flags, version=cfg.version),
        ]

    def env(self, cfg: EngineConfig, host: str) -> dict[str, str]:
        return dict(cfg.env)

    def version(self) -> str | None:
        return f"servetune-sim-{servetune.__version__}"

    def parse_log(self, text: str) -> EngineFacts:
        """vLLM's parser; `version` stays the vLLM version the simulator imitates."""
        return parse_vllm_log(text).model_copy(update={"engine": "sim"})
