"""`Target`: what a command is asked to plan, simulate or run — an engine config (flags read by the one engine
vocabulary), a GPU model and how many (read by the one `--gpu NAME[xN]` reader), and the vLLM release to follow.

`plan`, `estimate`, `sim-serve` and `tune` all build theirs here, so one argv means one target everywhere, and
`--show-config` prints it the same way for each (what servetune understood, before any work).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig, EngineName
from servetune.engines.vocab import parse_argv
from servetune.hardware.catalog import GPUSpec
from servetune.hardware.gpus import parse_gpu_arg

SIM_TARGET_FLAGS = ("gpu", "vllm-version")
"""sim-serve's own flags that name the target rather than the simulation."""


class Target(BaseModel):
    """An engine config on a number of GPUs of one model."""

    model_config = ConfigDict(frozen=True)

    config: EngineConfig
    gpu: GPUSpec
    gpus: int
    vllm_version: str | None = None

    def shown(self) -> dict[str, Any]:
        """The target as `--show-config` prints it (sim-only flags apart: they are not the engine's)."""
        flags = {k: v for k, v in self.config.flags.items() if v is not None}
        return {
            "engine": self.config.engine,
            "model": self.config.model,
            "flags": flags,
            "gpu": self.gpu.name,
            "gpus": self.gpus,
            "vllm_version": self.vllm_version,
        }


def resolve_target(
    *,
    engine: EngineName,
    model: str,
    argv: list[str],
    gpu: str | None = None,
    vllm_version: str | None = None,
    allow_unknown: bool = False,
) -> Target:
    """Reads a command's engine words and GPU argument. For `engine="sim"` the GPU and the vLLM release may be
    sim-serve flags among the words (`--gpu H200x2 --vllm-version 0.24.0`), as sim-serve takes them."""
    flags = parse_argv(engine, argv, version=vllm_version, allow_unknown=allow_unknown)
    if engine == "sim":
        gpu = str(flags.pop("gpu", None) or gpu or "H200")
        vllm_version = str(flags.pop("vllm-version", None) or vllm_version or "") or None
    gpu_spec, count = parse_gpu_arg(gpu or "local")
    config = EngineConfig(engine=engine, model=model, flags=flags, version=vllm_version)
    return Target(config=config, gpu=gpu_spec, gpus=count, vllm_version=vllm_version)
