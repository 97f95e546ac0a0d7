"""`sim`: servetune's own simulated vLLM, launched and parsed exactly like vLLM.

`servetune sim-serve` takes vLLM's flag names and prints vLLM-shaped startup lines, so the vLLM log parser and
failure patterns apply unchanged; only the command differs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import servetune
from servetune.engines.adapter import EngineAdapter, Image
from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.vllm import VllmAdapter, parse_vllm_log


class SimAdapter(VllmAdapter):
    """The simulator: vLLM's conventions, servetune's process (no image: a deployment runs the vLLM it imitates)."""

    name = "sim"
    image_program = ()

    def program(self) -> list[str]:
        return [sys.executable, "-m", "servetune", "sim-serve"]

    def model_args(self, model: str, program: Sequence[str]) -> list[str]:
        return ["--model", model]

    def image(self, version: str | None, gpus: int) -> Image:
        return EngineAdapter.image(self, version, gpus)  # vLLM's image would run vLLM, not the simulator

    def env(self, cfg: EngineConfig, host: str) -> dict[str, str]:
        return dict(cfg.env)

    def version(self) -> str | None:
        return f"servetune-sim-{servetune.__version__}"

    def parse_log(self, text: str) -> EngineFacts:
        """vLLM's parser; `version` stays the vLLM version the simulator imitates."""
        return parse_vllm_log(text).model_copy(update={"engine": "sim"})
