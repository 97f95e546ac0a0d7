"""The fallback profile a crash loop switches to, and the capacity it gives up, in numbers.

Planned (vLLM): the planner re-plans the config on half the GPUs (TP2 → TP1, the seed-000 case: one card died
or keeps faulting), keeps the longest max_model_len that still fits, and lowers max_num_seqs to the number of
requests whose KV cache fits; the capacity before and after are the planner's figures.  Given (any engine,
`--fallback FILE`): the profile is the user's, and the capacity comes from the engines' own startup facts.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.flagtable import FlagValue
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GPUSpec
from servetune.plan.api import Plan, plan_for


class Capacity(BaseModel):
    """What a profile can hold, and who says so (`planner` or the engine's startup log)."""

    model_config = ConfigDict(frozen=True)

    source: str
    tensor_parallel_size: int | None = None
    num_gpus: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    """Requests of max_model_len tokens that fit in the KV cache at once."""
    n_slots: int | None = None
    """llama.cpp: parallel slots (each holds one request of max_model_len = n_ctx / n_slots)."""


class Fallback(BaseModel):
    """A smaller profile, how it was chosen, and what it gives up."""

    model_config = ConfigDict(frozen=True)

    cfg: EngineConfig
    how: str
    before: Capacity | None = None
    after: Capacity | None = None

    def gives_up(self) -> str:
        return gives_up(self.before, self.after)


def capacity_of_plan(plan: Plan) -> Capacity:
    return Capacity(
        source=f"planner (vLLM {plan.vllm_version} ledger, {plan.available_kv_source} KV budget)",
        tensor_parallel_size=plan.tensor_parallel_size,
        num_gpus=plan.num_gpus,
        max_model_len=plan.max_model_len,
        max_num_seqs=plan.max_num_seqs,
        kv_cache_tokens=plan.kv_cache_tokens,
        max_concurrency=round(plan.max_concurrency, 2),
    )


def capacity_of_facts(facts: EngineFacts, cfg: EngineConfig) -> Capacity:
    """Capacity as the running engine's startup log states it (measured, not planned)."""
    seqs = cfg.flags.get("max-num-seqs")
    concurrency = facts.max_concurrency if facts.max_concurrency is not None else facts.n_slots
    return Capacity(
        source=f"{cfg.engine} startup log",
        max_model_len=facts.max_model_len or facts.n_ctx_per_slot,
        max_num_seqs=int(seqs) if isinstance(seqs, int | str) and str(seqs).isdigit() else None,
        kv_cache_tokens=facts.kv_cache_tokens or facts.n_ctx,
        max_concurrency=round(float(concurrency), 2) if concurrency is not None else None,
        n_slots=facts.n_slots,
    )


_LABELS = (
    ("num_gpus", "GPUs"),
    ("tensor_parallel_size", "tensor parallel"),
    ("max_model_len", "max_model_len"),
    ("kv_cache_tokens", "KV cache tokens"),
    ("max_concurrency", "requests of max_model_len at once"),
    ("max_num_seqs", "max_num_seqs"),
    ("n_slots", "slots"),
)


def gives_up(before: Capacity | None, after: Capacity | None) -> str:
    """'KV cache tokens 1,353,657 → 301,119 (-78%), ...' for every figure both sides know."""
    if before is None or after is None:
        return "capacity unknown (no plan and no startup facts)"
    parts = []
    for key, label in _LABELS:
        a, b = getattr(before, key), getattr(after, key)
        if a is None or b is None:
            continue
        pct = f" ({(b - a) / a * 100:+.0f}%)" if a and a != b else ""
        parts.append(f"{label} {a:,} → {b:,}{pct}")
    who = before.source if before.source == after.source else f"{before.source} → {after.source}"
    return "; ".join(parts) + f" ({who})"


def set_flag(cfg: EngineConfig, key: str, value: FlagValue) -> EngineConfig:
    """The config with one vLLM flag set (a config holds canonical names, whatever spelling the user wrote)."""
    return cfg.with_flags(**{key: value})


def plan_fallback(
    cfg: EngineConfig, gpu: GPUSpec, num_gpus: int, *, typical_request_tokens: int | None = None
) -> Fallback:
    """TP halved on half the GPUs, with the longest max_model_len and the max_num_seqs that fit.

    `typical_request_tokens` (prompt + output of the workload) sizes max_num_seqs; without it every running
    request is assumed to grow to max_model_len, so none is ever preempted for lack of KV cache.
    """
    if cfg.engine != "vllm":
        raise ServetuneError(
            f"the planner plans vLLM only, not {cfg.engine}", "give a fallback profile with --fallback FILE"
        )
    before = plan_for(cfg, gpu, num_gpus, with_fixes=False)
    tp = before.tensor_parallel_size
    if tp < 2:
        raise ServetuneError(
            "no smaller profile to plan: the config already runs with tensor parallel 1",
            "give a fallback profile with --fallback FILE (e.g. a shorter max-model-len)",
        )
    new_tp = tp // 2
    new_gpus = max(1, num_gpus * new_tp // tp)
    trial = set_flag(cfg, "tensor-parallel-size", new_tp)
    plan = plan_for(trial, gpu, new_gpus, with_fixes=False)
    steps = [f"tensor parallel {tp} → {new_tp} on {new_gpus}x {gpu.name}"]
    if not plan.feasible and 0 < plan.estimated_max_model_len < plan.max_model_len:
        trial = set_flag(trial, "max-model-len", plan.estimated_max_model_len)
        plan = plan_for(trial, gpu, new_gpus, with_fixes=False)
        steps.append(f"max_model_len {before.max_model_len:,} → {plan.max_model_len:,} (the longest that fits)")
    if not plan.feasible:
        raise ServetuneError(
            f"no fallback fits on {new_gpus}x {gpu.name}: " + "; ".join(plan.reasons),
            "give a fallback profile with --fallback FILE (e.g. INT4 weights)",
        )
    tokens = typical_request_tokens or plan.max_model_len
    fit = max(1, math.floor(plan.concurrency_for(min(tokens, plan.max_model_len))))
    if fit < plan.max_num_seqs:
        trial = set_flag(trial, "max-num-seqs", fit)
        plan = plan_for(trial, gpu, new_gpus, with_fixes=False)
        steps.append(f"max_num_seqs {before.max_num_seqs} → {fit} (requests of {tokens:,} tokens that fit)")
    return Fallback(
        cfg=trial,
        how="planned: " + "; ".join(steps),
        before=capacity_of_plan(before),
        after=capacity_of_plan(plan),
    )


def given_fallback(cfg: EngineConfig, where: str) -> Fallback:
    """A user's fallback profile; its capacity is known once it runs (from its startup facts)."""
    return Fallback(cfg=cfg, how=f"given: {where}")
