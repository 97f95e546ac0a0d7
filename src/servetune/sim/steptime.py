"""How long one engine step takes: GPU time from the planner's roofline, CPU time from a launch model.

A vLLM step has two parts that run on different devices. On the GPU, `servetune.plan.roofline.step_time` prices
what the step computes from the bytes it reads (weights once, every context token's KV, each sequence's
recurrent state) and the FLOPs it does, at the efficiencies of `plan.roofline.Efficiency`, plus TP all-reduces,
a fixed per-step overhead and a per-sequence cost (sampling grows with the batch). On the CPU, the engine
schedules the step, prepares its inputs and launches its kernels: a decode-only step replays one CUDA graph
(`cpu_step_s`), a step with prompt tokens runs piecewise graphs with the attention (and Gated-DeltaNet) ops
launched eagerly in between, which costs `cpu_prefill_step_s` more. On an H200 with vLLM 0.24.0 that launch is
the largest cost of a short prefill on the hybrid and hybrid-MoE shapes (~80-170 ms against ~15 ms of GPU work
for 512 tokens; benchmarks/device_campaign/FIDELITY.md), which is why a step that mixes one short prompt into a
batch of decodes is several times a decode step. How the two overlap is the engine's business (`engine.py`:
with async scheduling the CPU prepares step k+1 while the GPU runs step k).

The API server adds `request_overhead_s` per request and `request_token_s` per prompt token before the engine sees
it (parsing, tokenization: vLLM's API-server part of TTFT grows with the prompt), one request at a time
(`virtual.py`, `server.py`). `servetune calibrate` fits every coefficient on measured runs (`calibration.py`); the
defaults are planning values.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from servetune.hardware.catalog import GPUSpec
from servetune.plan.roofline import Efficiency, ModelCosts, step_time
from servetune.sim.scheduler import StepPlan

REQUEST_TOKEN_S = 3.5e-6
"""The default API-server time per prompt token: vLLM 0.24.0's API-server part of TTFT (its TTFT − queue − prefill) for
one request alone on an H200 grew from 7.8 to 62.3 ms between a 1,024- and a 16,384-token prompt on the hybrid
Qwen3.6-27B shape (3.5 µs a token) and from 7.3 to 69.7 ms on the Qwen3-30B-A3B shape (4.1 µs):
benchmarks/device_campaign/data/H1 and M1, `decode_c1` against `prefill_16k`. A planning value; a calibration
profile fits its own."""


class StepCoefficients(BaseModel):
    """The calibratable part of the step-time model (one set per GPU + model + engine version)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    efficiency: Efficiency = Field(default_factory=Efficiency, description="The planner's roofline fractions.")
    per_seq_overhead_s: float = Field(2e-5, ge=0, description="GPU cost per scheduled sequence per step.")
    request_overhead_s: float = Field(0.003, ge=0, description="API-server time per request, before scheduling.")
    request_token_s: float = Field(
        REQUEST_TOKEN_S, ge=0, description="API-server time per prompt token (tokenization), before scheduling."
    )
    cpu_step_s: float = Field(0.001, ge=0, description="CPU time to schedule, prepare and launch a step.")
    cpu_prefill_step_s: float | None = Field(
        None,
        ge=0,
        description="Extra CPU time of a step with prompt tokens (eager ops between graph pieces); None: from the "
        "model's layers (`prefill_launch_s`).",
    )


PREFILL_LAUNCH_ATTENTION_LAYER_S = 5e-4
PREFILL_LAUNCH_LINEAR_LAYER_S = 4e-3
"""The default launch cost of a step with prompt tokens, per full-attention and per Gated-DeltaNet layer: fitted on
an H200 with vLLM 0.24.0 (benchmarks/device_campaign/FIDELITY.md): ~23 and ~30 ms for the MoE and dense shapes
(48 and 64 attention layers), ~150-170 ms for the hybrid and hybrid-MoE ones (48 and 30 GDN layers: 3-5.5 ms
each, this default takes 4). A planning value; a calibration profile replaces it."""


def prefill_launch_s(costs: ModelCosts) -> float:
    """The model-derived default of `cpu_prefill_step_s` (see the constants above)."""
    attention = costs.num_layers - costs.num_linear_layers
    return attention * PREFILL_LAUNCH_ATTENTION_LAYER_S + costs.num_linear_layers * PREFILL_LAUNCH_LINEAR_LAYER_S


@dataclass(frozen=True)
class StepTimeModel:
    """Prices a `StepPlan` in seconds: its GPU time and its CPU (launch) time. Build it with `of` (which fills in
    the model-derived defaults, so `coef` holds every value it prices with)."""

    costs: ModelCosts
    gpu: GPUSpec
    coef: StepCoefficients

    @classmethod
    def of(cls, costs: ModelCosts, gpu: GPUSpec, coef: StepCoefficients | None = None) -> StepTimeModel:
        coef = coef or StepCoefficients()
        if coef.cpu_prefill_step_s is None:
            coef = coef.model_copy(update={"cpu_prefill_step_s": prefill_launch_s(costs)})
        return cls(costs, gpu, coef)

    def gpu_time(self, plan: StepPlan) -> float:
        """Seconds the GPU works on the step (roofline + per-step and per-sequence overheads)."""
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

    def api_time(self, prompt_tokens: int) -> float:
        """Seconds the API server spends on one request before the engine sees it (parsing, tokenizing)."""
        return self.coef.request_overhead_s + self.coef.request_token_s * prompt_tokens

    def cpu_time(self, plan: StepPlan) -> float:
        """Seconds the engine's CPU spends scheduling, preparing and launching the step."""
        return self.coef.cpu_step_s + ((self.coef.cpu_prefill_step_s or 0.0) if plan.prefill_chunks else 0.0)

    def decode_gpu_times(self, seqs: int, context: int, steps: int) -> list[float]:
        """GPU times of `steps` consecutive decode-only steps of `seqs` sequences (no speculation), the first
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
