"""How long one engine step takes: the planner's roofline applied to the step the scheduler planned.

`servetune.plan.roofline.step_time` prices a step from the bytes it reads (weights once, every context
token's KV, each sequence's recurrent state) and the FLOPs it does (2 per active parameter per token plus
the attention term), at the efficiencies of `plan.roofline.Efficiency`, plus TP all-reduces and a fixed
per-step overhead. The simulator adds two costs the roofline does not see: a per-sequence cost per step
(sampling, bookkeeping, input preparation grow with the batch) and a per-request cost in the API server
(parsing, tokenization, detokenization) that delays the first token. `servetune calibrate` fits all of
them on measured runs (see `calibration.py`); the defaults are the planner's planning values.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from servetune.hardware.catalog import GPUSpec
from servetune.plan.roofline import Efficiency, ModelCosts, step_time
from servetune.sim.scheduler import StepPlan


class StepCoefficients(BaseModel):
    """The calibratable part of the step-time model (one set per GPU + model + engine version)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    efficiency: Efficiency = Field(default_factory=Efficiency, description="The planner's roofline fractions.")
    per_seq_overhead_s: float = Field(2e-5, ge=0, description="Cost per scheduled sequence per step.")
    request_overhead_s: float = Field(0.003, ge=0, description="API-server time per request, before scheduling.")


@dataclass(frozen=True)
class StepTimeModel:
    """Prices a `StepPlan` in seconds."""

    costs: ModelCosts
    gpu: GPUSpec
    coef: StepCoefficients

    def step_time(self, plan: StepPlan) -> float:
        t = step_time(
            self.costs, self.gpu, decode_seqs=plan.num_decode, decode_context=plan.decode_context,
            prefill=list(plan.prefill_chunks), spec_tokens=plan.num_spec_tokens, eff=self.coef.efficiency,
        )
        return t.seconds + self.coef.per_seq_overhead_s * len(plan.scheduled)
