"""Checking the planner against a real vLLM startup log, and refitting the overhead model from it.

From the log: "Model loading took W GiB" (weights per GPU), "Available KV cache memory: A GiB" (per rank:
vLLM keeps the smallest pool, so the minimum counts), the capacity lines, the block size, and the CUDA-graph
estimate implied by "The current --gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=E".
Given A, the rest of the ledger is exact; the difference between the modelled and the logged A is the error
of the overhead model, which `fit_overhead` folds back into its coefficients.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.hardware.catalog import GiB
from servetune.plan.memory import Overhead, OverheadModel

_AVAILABLE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_WEIGHTS = re.compile(r"Model loading took ([\d.]+) GiB")
_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")
_EQUIV = re.compile(r"current --gpu-memory-utilization=([\d.]+) is equivalent to --gpu-memory-utilization=([\d.]+)")
_VERSION = re.compile(r"(?:vLLM API server version|version) v?(\d+\.\d+\.\d+)")


_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")
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


def flags_from_log(text: str) -> dict[str, Any]:
    """The `vllm serve` flags a log's "non-default args: {...}" line records, by vLLM's dashed names
    (serving-only flags such as host, port and load format left out)."""
    found = _NON_DEFAULT.findall(text)
    if not found:
        return {}
    try:
        args = ast.literal_eval(found[-1])
    except (ValueError, SyntaxError):
        return {}
    if not isinstance(args, dict):
        return {}
    flags = {str(k).replace("_", "-"): v for k, v in args.items()}
    return {k: v for k, v in flags.items() if k not in _NOT_LEDGER}


class LogFigures(BaseModel):
    """The capacity-relevant figures of one vLLM startup log (None when the log does not say)."""

    model_config = ConfigDict(frozen=True)

    version: str | None = None
    weights_gib: float | None = None
    available_kv_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    concurrency_tokens: int | None = None
    block_size: int | None = None
    util_with_graphs: float | None = None
    util_without_graphs: float | None = None
    log_lines: list[str] = []

    def cudagraph_estimate_bytes(self, total_bytes: int) -> int | None:
        """The CUDA-graph estimate vLLM subtracted (from its utilization equivalence line; +-0.00005 x total)."""
        if self.util_with_graphs is None or self.util_without_graphs is None:
            return None
        return round((self.util_with_graphs - self.util_without_graphs) * total_bytes)


def read_startup_log(text: str) -> LogFigures:
    """Extracts the figures; with tensor parallelism the smallest available KV memory of all ranks counts."""
    available = [float(x) for x in _AVAILABLE.findall(text)]
    weights = [float(x) for x in _WEIGHTS.findall(text)]
    tokens = _TOKENS.findall(text)
    conc = _CONC.findall(text)
    block = _BLOCK.findall(text)
    equiv = _EQUIV.findall(text)
    version = _VERSION.findall(text)
    lines = [
        m.group(0) for m in re.finditer(r"GPU KV cache size: [\d,]+ tokens(?:, Maximum concurrency[^\n]*x)?", text)
    ]
    lines += [
        m.group(0)
        for m in re.finditer(r"Maximum concurrency for [\d,]+ tokens per request: [\d.]+x", text)
        if not any(m.group(0) in line for line in lines)
    ]
    return LogFigures(
        version=version[-1] if version else None,
        weights_gib=max(weights) if weights else None,
        available_kv_gib=min(available) if available else None,
        kv_cache_tokens=int(tokens[-1].replace(",", "")) if tokens else None,
        max_concurrency=float(conc[-1][1]) if conc else None,
        concurrency_tokens=int(conc[-1][0].replace(",", "")) if conc else None,
        block_size=int(block[-1]) if block else None,
        util_with_graphs=float(equiv[-1][0]) if equiv else None,
        util_without_graphs=float(equiv[-1][1]) if equiv else None,
        log_lines=lines,
    )


def available_bytes(figures: LogFigures) -> int | None:
    """The logged available KV memory in bytes (vLLM prints GiB with two decimals; the midpoint is used)."""
    return None if figures.available_kv_gib is None else round(figures.available_kv_gib * GiB)


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
    figures: LogFigures,
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


def fit_overhead(model: OverheadModel, check: OverheadCheck, overhead: Overhead) -> OverheadModel:
    """Moves the model's graph estimate to the logged one and puts the rest of the error on non-torch memory.

    One start cannot separate non-torch memory from the activation peak, so the remainder goes to the
    term with the widest prior; with several starts (different max_num_batched_tokens) a user can refit
    `activation_copies` too.
    """
    if check.non_kv_log_gib is None:
        return model
    updates: dict[str, float] = {}
    graph_error = 0.0
    if check.cudagraph_log_gib is not None and overhead.cudagraph_bytes:
        scale = check.cudagraph_log_gib / (overhead.cudagraph_bytes / GiB)
        updates["cudagraph_base_gib"] = model.cudagraph_base_gib * scale
        updates["cudagraph_per_layer_size_kib"] = model.cudagraph_per_layer_size_kib * scale
        graph_error = check.cudagraph_log_gib - overhead.cudagraph_bytes / GiB
    rest = check.non_kv_log_gib - check.non_kv_model_gib - graph_error
    updates["non_torch_gib"] = max(0.0, model.non_torch_gib + rest)
    return model.model_copy(update=updates)
