"""`Target`: what a command is asked to plan, simulate or run — an engine config (flags read by the one engine
vocabulary), a GPU model and how many (read by the one `--gpu NAME[xN]` reader), and the vLLM release to follow.

`plan`, `estimate`, `sim-serve` and `tune` all build theirs here, so one argv means one target everywhere, and
`--show-config` prints it the same way for each (what servetune understood, before any work).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig, EngineName
from servetune.engines.flagtable import table_for
from servetune.engines.vocab import parse_argv
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GPUSpec
from servetune.hardware.gpus import parse_gpu_arg
from servetune.plan.placement import Placement, place

SIM_TARGET_FLAGS = ("gpu", "vllm-version")
"""sim-serve's own flags that name the target rather than the simulation."""


class Target(BaseModel):
    """An engine config on a number of GPUs of one model."""

    model_config = ConfigDict(frozen=True)

    config: EngineConfig
    placement: Placement
    vllm_version: str | None = None

    @property
    def gpu(self) -> GPUSpec:
        return self.placement.gpu

    @property
    def gpus(self) -> int:
        return self.placement.gpus

    def shown(self) -> dict[str, Any]:
        """The target as `--show-config` prints it; the simulator's own flags apart (they are not vLLM's)."""
        sim_only = {spec.name for spec in table_for("sim").flags if spec.sim_only}
        given = {k: v for k, v in self.config.flags.items() if v is not None}
        shown: dict[str, Any] = {
            "engine": self.config.engine,
            "model": self.config.model,
            "flags": {k: v for k, v in given.items() if k not in sim_only},
            **self.placement.shown(),
            "vllm_version": self.vllm_version,
        }
        if self.config.engine == "sim":
            shown["simulator_flags"] = {k: v for k, v in given.items() if k in sim_only}
        return shown


def resolve_target(
    *,
    engine: EngineName,
    model: str | None,
    argv: list[str],
    gpu: str | None = None,
    vllm_version: str | None = None,
    allow_unknown: bool = False,
) -> Target:
    """Reads a command's engine words and GPU argument. For `engine="sim"` the GPU and the vLLM release may be
    sim-serve flags among the words (`--gpu H200x2 --vllm-version 0.24.0`), as sim-serve takes them."""
    flags = parse_argv(engine, argv, version=vllm_version, allow_unknown=allow_unknown)
    model = str(flags.pop("model", None) or model or "")
    if not model:
        raise ServetuneError("no model given", "name the model (a directory with config.json, or a bundled name)")
    if engine == "sim":
        gpu = str(flags.pop("gpu", None) or gpu or "H200")
        vllm_version = str(flags.pop("vllm-version", None) or vllm_version or "") or None
    placement = place(parse_gpu_arg(gpu or "local"), flags)
    config = EngineConfig(engine=engine, model=model, flags=flags, version=vllm_version)
    return Target(config=config, placement=placement, vllm_version=vllm_version)
