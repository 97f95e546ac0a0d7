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
            self.costs,
            self.gpu,
            decode_seqs=plan.num_decode,
            decode_context=plan.decode_context,
            prefill=list(plan.prefill_chunks),
            spec_tokens=plan.num_spec_tokens,
            eff=self.coef.efficiency,
        )
        return t.seconds + self.coef.per_seq_overhead_s * len(plan.scheduled)

    def decode_step_times(self, seqs: int, context: int, steps: int) -> list[float]:
        """Times of `steps` consecutive decode-only steps of `seqs` sequences (no speculation), the first
        holding `context` tokens in total, each next one `seqs` more.

        The roofline's memory and compute times are both linear in the context, so two evaluations give
        every step exactly (the max of two lines), without pricing each step apart.
        """
        eff = self.coef.efficiency
        a = step_time(self.costs, self.gpu, decode_seqs=seqs, decode_context=context, eff=eff)
        b = step_time(self.costs, self.gpu, decode_seqs=seqs, decode_context=context + seqs, eff=eff)
        dm, dc = b.memory_s - a.memory_s, b.compute_s - a.compute_s
        fixed = a.comm_s + a.overhead_s + self.coef.per_seq_overhead_s * seqs
        return [max(a.memory_s + j * dm, a.compute_s + j * dc) + fixed for j in range(steps)]
