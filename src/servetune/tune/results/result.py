"""What the store keeps: per variant its status (done, failed with class and excerpt, skipped with the
planner's reasons) and per (variant, probe, repeat) a `RunResult`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from servetune.suite.result import ProbeResult
from servetune.tune.schema.variants import Variant

VariantStatus = Literal["pending", "running", "done", "failed", "skipped"]


class Failure(BaseModel):
    """Why a variant did not finish: the engine adapter's failure class and the log lines that prove it."""

    model_config = ConfigDict(frozen=True)

    klass: str
    excerpt: str = ""
    hint: str | None = None
    during: str = Field(default="launch", description="launch, or the probe that was running.")


class LostAttempt(BaseModel):
    """A launch that ended without its slot's answer (the Ray node died, the slot's process or task was lost):
    its variants were recorded failed with this cause, then launched once more elsewhere."""

    model_config = ConfigDict(frozen=True)

    ran_on: str
    failure: Failure


class RunResult(BaseModel):
    """(variant, probe, repeat) → the probe's figures, as stored the moment it finishes."""

    model_config = ConfigDict(frozen=True)

    variant_key: str
    probe: str
    repeat: int
    result: ProbeResult
    wall_s: float
    time_scale: float = Field(
        default=1.0,
        description="sim-serve's --time-scale the run was measured at; `result` is already in simulated time "
        "(times × scale, rates ÷ scale by each figure's declared scaling: see suite.run), so never convert it again.",
    )


class VariantRecord(BaseModel):
    """A variant with everything known about it after (or during) the experiment."""

    variant: Variant
    position: int
    status: VariantStatus = "pending"
    failure: Failure | None = None
    skip_reasons: list[str] = Field(default_factory=list)
    launch_s: float | None = None
    wall_s: float | None = None
    gpu_minutes: float = 0.0
    facts: dict[str, Any] = Field(default_factory=dict, description="Engine startup facts (KV cache size...).")
    estimated: bool = Field(default=False, description="Judged by the simulator's estimate only.")
    ran_on: str | None = Field(
        default=None, description="Where its last launch ran: this host, its GPUs or its Ray node, and the engine pid."
    )
    lost: list[LostAttempt] = Field(default_factory=list, description="Launches lost on the way (then retried).")
    runs: list[RunResult] = Field(default_factory=list)

    @property
    def key(self) -> str:
        return self.variant.key()
