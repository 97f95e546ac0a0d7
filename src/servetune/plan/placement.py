"""How many GPUs a config runs on: the one rule joining `--gpu NAME[xN]` and vLLM's parallel sizes.

- a counted GPU argument (`A100-80G-SXMx2`, `H200x1`, `local`) fixes the GPUs; an unset `--tensor-parallel-size`
  fills them (N / (PP x DP), as vLLM users mean by "TP over my GPUs");
- an uncounted one (`A100-80G-SXM`) names the model only: the config takes as many as TP x PP x DP;
- a config needing more GPUs than counted does not fit (the planner's reason; the simulator refuses it the
  same way); one needing fewer uses part of them, and says so.

`plan`, `estimate`, `sim-serve` and `tune` (its feasibility, pruning and GPU-minutes) all place through here,
so `--gpu A100-80G-SXM --tp 2` is two GPUs everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from servetune.hardware.catalog import GPUSpec
from servetune.hardware.gpus import GpuChoice


class Placement(BaseModel):
    """A config's GPUs and parallel sizes."""

    model_config = ConfigDict(frozen=True)

    gpu: GPUSpec
    gpus: int
    """GPUs given to the config (counted, or the world size when the count was only implied)."""
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def problem(self) -> str | None:
        """Why the config cannot run on these GPUs (None when it can)."""
        if self.world_size <= self.gpus:
            return None
        return (
            f"tensor-parallel-size {self.tensor_parallel_size} x pipeline-parallel-size "
            f"{self.pipeline_parallel_size} x data-parallel-size {self.data_parallel_size} needs "
            f"{self.world_size} GPUs, but {self.gpus} given"
        )

    def shown(self) -> dict[str, object]:
        """As `--show-config` (and `tune --check --json`) print it."""
        return {
            "gpu": self.gpu.name,
            "gpus": self.gpus,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "data_parallel_size": self.data_parallel_size,
        }

    @property
    def notes(self) -> list[str]:
        if self.world_size < self.gpus:
            return [f"the config uses {self.world_size} of the {self.gpus} GPUs given"]
        return []


def _size(flags: Mapping[str, object], name: str) -> int | None:
    value = flags.get(name)
    return int(value) if isinstance(value, int | float | str) and not isinstance(value, bool) and value != "" else None


def place(choice: GpuChoice, flags: Mapping[str, object]) -> Placement:
    """Places a config (vLLM flags by canonical name, typed values) on the GPUs a `--gpu` argument names."""
    pp = _size(flags, "pipeline-parallel-size") or 1
    dp = _size(flags, "data-parallel-size") or 1
    tp = _size(flags, "tensor-parallel-size")
    if tp is None:
        tp = max(1, choice.count // (pp * dp)) if choice.counted else 1
    gpus = choice.count if choice.counted else tp * pp * dp
    return Placement(
        gpu=choice.gpu, gpus=gpus, tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=dp
    )
