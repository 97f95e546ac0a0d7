"""Fixes for a plan that does not fit: single changes (then pairs), each re-planned for its capacity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GiB, GPUSpec
from servetune.model.spec import ModelSpec
from servetune.plan.inputs import PlanInputs
from servetune.plan.rules import valid_tp_sizes


class Planned(Protocol):
    """What a fix needs of a plan (`plan.api.Plan` has it; a protocol keeps this module below the api)."""

    @property
    def feasible(self) -> bool: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def estimated_max_model_len(self) -> int: ...

    @property
    def gpu_memory_utilization(self) -> float: ...

    @property
    def max_concurrency(self) -> float: ...

    @property
    def kv_cache_tokens(self) -> int: ...

    @property
    def weights_bytes_per_gpu(self) -> int: ...


Replan = Callable[[EngineConfig, int], Planned]
"""Plans a changed config on a number of GPUs (without looking for fixes itself)."""


class Fix(BaseModel):
    """A change that makes an infeasible plan fit, with the capacity it gives."""

    model_config = ConfigDict(frozen=True)

    change: str
    flags: dict[str, Any]
    num_gpus: int
    max_concurrency: float
    kv_cache_tokens: int
    weights_gib_per_gpu: float

    def __str__(self) -> str:
        return f"{self.change}: {self.max_concurrency:.2f}x at max_model_len ({self.kv_cache_tokens:,} KV tokens)"


def find_fixes(
    cfg: EngineConfig,
    gpu: GPUSpec,
    num_gpus: int,
    spec: ModelSpec,
    inputs: PlanInputs,
    plan: Planned,
    replan: Replan,
) -> list[Fix]:
    """Single changes (then pairs) that make the plan fit, each with its resulting capacity."""
    tp = inputs.tensor_parallel_size
    int4 = "gptq" if gpu.compute_capability < 7.5 else "awq"
    candidates: list[tuple[str, dict[str, Any], int]] = []
    for t in valid_tp_sizes(spec):
        if t > tp:
            gpus = max(num_gpus, t * inputs.pipeline_parallel_size * inputs.data_parallel_size)
            candidates.append((f"tensor-parallel-size {t}", {"tensor-parallel-size": t}, gpus))
            break
    if spec.quant.method == "none":
        candidates.append((f"INT4 weights ({int4.upper()} group 128 checkpoint)", {"quantization": int4}, num_gpus))
        if gpu.compute_capability >= 8.0:
            candidates.append(("FP8 weights", {"quantization": "fp8"}, num_gpus))
    if not inputs.kv_fp8:
        candidates.append(("FP8 KV cache", {"kv-cache-dtype": "fp8"}, num_gpus))
    if plan.estimated_max_model_len and plan.estimated_max_model_len < plan.max_model_len:
        candidates.append(
            (
                f"max-model-len {plan.estimated_max_model_len:,}",
                {"max-model-len": plan.estimated_max_model_len},
                num_gpus,
            )
        )
    if plan.gpu_memory_utilization < 0.95:
        candidates.append(("gpu-memory-utilization 0.95", {"gpu-memory-utilization": 0.95}, num_gpus))
    if gpu.compute_capability < 8.0 and not any(k.lstrip("-").replace("_", "-") == "dtype" for k in cfg.flags):
        candidates = [(c, {**f, "dtype": "float16"}, n) for c, f, n in candidates]

    def attempt(change: str, flags: dict[str, Any], n: int) -> Fix | None:
        try:
            trial = replan(cfg.with_flags(**{k.replace("-", "_"): v for k, v in flags.items()}), n)
        except ServetuneError:
            return None
        if not trial.feasible:
            return None
        return Fix(
            change=change + (f" on {n} GPUs" if n != num_gpus else ""),
            flags=flags,
            num_gpus=n,
            max_concurrency=trial.max_concurrency,
            kv_cache_tokens=trial.kv_cache_tokens,
            weights_gib_per_gpu=trial.weights_bytes_per_gpu / GiB,
        )

    fixes = [f for f in (attempt(*c) for c in candidates) if f]
    if not fixes:
        for i, (c1, f1, n1) in enumerate(candidates):
            for c2, f2, n2 in candidates[i + 1 :]:
                fix = attempt(f"{c1} + {c2}", {**f1, **f2}, max(n1, n2))
                if fix:
                    fixes.append(fix)
    return fixes
