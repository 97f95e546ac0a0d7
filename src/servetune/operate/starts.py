"""Every engine start `servetune serve` made, how long it took and whether vLLM's compile cache was warm, and the
time the next start of a config is expected to take.

A start's time is launch to an accepted engine (what a client waits while no engine serves). Whether it was warm
is the engine's own word (`EngineFacts.compile_cache`, from vLLM's log); whether the next one will be is predicted
from the compile identity (`EngineAdapter.compile_identity`: the config minus the flags vLLM's cache key leaves
out): a config whose identity started before in this serve is expected warm, any other cold. The estimate is a
measured start of the same kind, never a constant: the slowest warm start of that identity, else the slowest
cold start of the engine and model, else the tuning folder's measured cold start; with none of them, unknown
(the startup timeout bounds it).
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.registry import adapter_for
from servetune.operate.evidence import Sized

Cache = Literal["warm", "cold"]


class StartRecord(BaseModel):
    """One engine start that served (launch to accepted)."""

    model_config = ConfigDict(frozen=True)

    role: str
    engine: str
    model: str
    identity: str | None
    """The config's compile identity (None: no compile cache)."""
    seconds: float
    compile_cache: Cache | None
    """What the engine's log says: warm (loaded), cold (compiled), None (compiled nothing)."""
    compile_cache_key: str | None = None
    compile_cache_note: str | None = None
    at: float
    """Wall-clock time the engine was accepted."""


class StartEstimate(BaseModel):
    """How long a start of a config is expected to take, and why."""

    model_config = ConfigDict(frozen=True)

    seconds: float | None
    """None: nothing comparable was measured."""
    expect: Cache | None
    """The compile cache the start is expected to find (None: the config compiles nothing)."""
    basis: str


def record(role: str, cfg: EngineConfig, facts: EngineFacts, seconds: float) -> StartRecord:
    """The record of an accepted start of `cfg`."""
    cache = facts.compile_cache if facts.compile_cache in ("warm", "cold") else None
    return StartRecord(
        role=role,
        engine=cfg.engine,
        model=cfg.model,
        identity=adapter_for(cfg.engine).compile_identity(cfg),
        seconds=round(seconds, 3),
        compile_cache=cache,  # type: ignore[arg-type]
        compile_cache_key=facts.compile_cache_key,
        compile_cache_note=facts.compile_cache_note,
        at=round(time.time(), 3),
    )


def estimate(records: list[StartRecord], cfg: EngineConfig, measured_cold: Sized | None = None) -> StartEstimate:
    """The expected time of a start of `cfg` from the starts measured so far (see the module docstring)."""
    identity = adapter_for(cfg.engine).compile_identity(cfg)
    same_model = [r for r in records if r.engine == cfg.engine and r.model == cfg.model]
    if identity is None:
        if same_model:
            slowest = max(same_model, key=lambda r: r.seconds)
            return StartEstimate(
                seconds=slowest.seconds,
                expect=None,
                basis=f"the slowest of {len(same_model)} start(s) of this engine and model measured by this serve",
            )
        return _unmeasured(None, measured_cold)
    same_key = [r for r in same_model if r.identity == identity]
    if same_key:
        warm = [r for r in same_key if r.compile_cache == "warm"]
        if warm:
            return StartEstimate(
                seconds=max(r.seconds for r in warm),
                expect="warm",
                basis=f"the slowest of {len(warm)} warm start(s) of this compile identity ({identity})",
            )
        return StartEstimate(
            seconds=max(r.seconds for r in same_key),
            expect="warm",
            basis=f"this compile identity ({identity}) started before, but no warm start of it was measured: "
            "its slowest start bounds this one",
        )
    cold = [r for r in same_model if r.compile_cache == "cold"]
    if cold:
        return StartEstimate(
            seconds=max(r.seconds for r in cold),
            expect="cold",
            basis=f"a new compile identity ({identity}): the slowest of {len(cold)} cold start(s) of this engine "
            "and model",
        )
    return _unmeasured("cold", measured_cold)


def _unmeasured(expect: Cache | None, measured_cold: Sized | None) -> StartEstimate:
    if measured_cold is not None:
        return StartEstimate(seconds=measured_cold.value, expect=expect, basis=measured_cold.source)
    return StartEstimate(
        seconds=None, expect=expect, basis="no start of this engine and model measured yet: the startup timeout"
    )
