"""Checking the planner against a real vLLM startup log, and refitting the overhead model from it.

From the log, as the vLLM adapter's one log parser (`engines.vllm.parse_vllm_log`) reads it: "Model loading took W
GiB" (weights per GPU), "Available KV cache memory: A GiB" (per rank: vLLM keeps the smallest pool, so the minimum
counts), the capacity lines, the block size, and the CUDA-graph estimate implied by "The current
--gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=E".
Given A, the rest of the ledger is exact; the difference between the modelled and the logged A is the error
of the overhead model, which `fit_overhead` folds back into its coefficients.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GiB, GPUSpec
from servetune.plan.api import Plan, plan_for
from servetune.plan.memory import Overhead, OverheadModel

_NOT_LEDGER = frozenset(
    {
        "model",
        "model-tag",
        "host",
        "port",
        "served-model-name",
        "load-format",
        "additional-config",
        "api-server-count",
        "uvicorn-log-level",
        "disable-log-requests",
        "trust-remote-code",
    }
)


def ledger_flags(facts: EngineFacts) -> dict[str, Any]:
    """The `vllm serve` flags a log's "non-default args: {...}" line records, by vLLM's dashed names (serving-only
    flags such as host, port and load format left out)."""
    args = facts.non_default_args or {}
    flags = {str(k).replace("_", "-"): v for k, v in args.items()}
    return {k: v for k, v in flags.items() if k not in _NOT_LEDGER}


class OverheadCheck(BaseModel):
    """Modelled against logged memory of one start (GiB)."""

    model_config = ConfigDict(frozen=True)

    weights_model_gib: float
    weights_log_gib: float | None
    available_model_gib: float
    available_model_low_gib: float
    available_model_high_gib: float
    available_log_gib: float | None
    non_kv_model_gib: float
    """Non-weight, non-KV memory the model predicts (non-torch + activation peak + graphs + encoder)."""
    non_kv_log_gib: float | None
    """The same, as the log implies: budget - weights - available KV."""
    cudagraph_model_gib: float
    cudagraph_log_gib: float | None

    @property
    def available_error_gib(self) -> float | None:
        """Modelled minus logged available KV memory."""
        return None if self.available_log_gib is None else self.available_model_gib - self.available_log_gib

    @property
    def within_stated_uncertainty(self) -> bool | None:
        """Whether the logged figure lies inside the model's stated range."""
        if self.available_log_gib is None:
            return None
        return self.available_model_low_gib - 0.01 <= self.available_log_gib <= self.available_model_high_gib + 0.01


def check_overhead(
    *,
    requested_bytes: int,
    weights_bytes: int,
    overhead: Overhead,
    available_model_bytes: int,
    uncertainty_bytes: int,
    figures: EngineFacts,
    total_bytes: int,
) -> OverheadCheck:
    """Compares a modelled ledger with the figures of a log."""
    graphs = figures.cudagraph_estimate_bytes(total_bytes)
    non_kv_log = None
    if figures.available_kv_gib is not None and figures.weights_gib is not None:
        non_kv_log = requested_bytes / GiB - figures.weights_gib - figures.available_kv_gib
    return OverheadCheck(
        weights_model_gib=weights_bytes / GiB,
        weights_log_gib=figures.weights_gib,
        available_model_gib=available_model_bytes / GiB,
        available_model_low_gib=(available_model_bytes - uncertainty_bytes) / GiB,
        available_model_high_gib=(available_model_bytes + uncertainty_bytes) / GiB,
        available_log_gib=figures.available_kv_gib,
        non_kv_model_gib=overhead.total_bytes / GiB,
        non_kv_log_gib=non_kv_log,
        cudagraph_model_gib=overhead.cudagraph_bytes / GiB,
        cudagraph_log_gib=None if graphs is None else graphs / GiB,
    )


def fit_overhead(model: OverheadModel, check: OverheadCheck, overhead: Overhead, tp: int = 1) -> OverheadModel:
    """Moves the model's graph estimate of the start's family to the logged one and puts the rest of the error on
    non-torch memory.

    One start cannot separate non-torch memory from the torch peak (unless vLLM logged its DEBUG breakdown), so the
    remainder goes to non-torch memory, and what would make it negative to the family's profile constant (per GPU at
    `tp`); several starts of a family (different max_num_seqs, max_num_batched_tokens) fit
    the family's profile constant and the per-row and per-token terms (benchmarks/device_campaign/planner_fit.py).
    """
    if check.non_kv_log_gib is None:
        return model
    families = dict(model.families)
    family = families[overhead.family]
    base = model.cudagraph_base_gib
    graph_error = 0.0
    if check.cudagraph_log_gib is not None and overhead.cudagraph_bytes:
        scale = check.cudagraph_log_gib / (overhead.cudagraph_bytes / GiB)
        family = family.model_copy(update={"cudagraph_per_layer_size_kib": family.cudagraph_per_layer_size_kib * scale})
        base *= scale
        graph_error = check.cudagraph_log_gib - overhead.cudagraph_bytes / GiB
    non_torch = model.non_torch_gib + check.non_kv_log_gib - check.non_kv_model_gib - graph_error
    if non_torch < 0:  # the profiling peak was smaller than modelled, too
        family = family.model_copy(update={"profile_gib": max(0.0, family.profile_gib + non_torch * tp)})
    families[overhead.family] = family
    return model.model_copy(
        update={"non_torch_gib": max(0.0, non_torch), "cudagraph_base_gib": base, "families": families}
    )


class LogComparison(BaseModel):
    """A vLLM startup log against the planner: the plan made with the log's available KV memory (everything after
    it is exact), the overhead model's prediction of that memory, and whether the capacity lines come out
    verbatim."""

    model_config = ConfigDict(frozen=True)

    lines_reproduced: bool
    logged: EngineFacts
    check: OverheadCheck
    plan: Plan


def compare_with_log(
    cfg: EngineConfig, gpu: GPUSpec, count: int, version: str | None, facts: EngineFacts
) -> LogComparison:
    """Plans `cfg` (its flags over those the log records) with the log's available KV memory and without it."""
    if facts.available_kv_gib is None:
        raise ServetuneError(
            "the log has no 'Available KV cache memory' line", "pass the log of a vLLM start that got that far"
        )
    from_log = cfg.model_copy(update={"flags": {}}).with_flags(**ledger_flags(facts))
    cfg = cfg.model_copy(update={"flags": {**from_log.flags, **cfg.flags}})  # flags given here win
    version = version or facts.version
    exact = plan_for(cfg, gpu, count, vllm_version=version, available_kv_bytes=facts.available_kv_bytes)
    modelled = plan_for(cfg, gpu, count, vllm_version=version, with_fixes=False)
    check = check_overhead(
        requested_bytes=modelled.requested_bytes,
        weights_bytes=modelled.weights_bytes_per_gpu,
        overhead=modelled.overhead,
        available_model_bytes=modelled.available_kv_bytes,
        uncertainty_bytes=modelled.available_kv_high_bytes - modelled.available_kv_bytes,
        figures=facts,
        total_bytes=gpu.memory_bytes,
    )
    logged = facts.capacity_lines or []
    match = bool(logged) and exact.log_lines == logged[-len(exact.log_lines) :]
    return LogComparison(lines_reproduced=match, logged=facts, check=check, plan=exact)
