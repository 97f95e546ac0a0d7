"""The simulated engine core: a scheduler plus a step-time model, advanced one step at a time.

Both drivers use it: `estimate.py` jumps a virtual clock from step to step (thousands of times faster
than real time), `server.py` sleeps each step's duration (optionally scaled) and streams the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from servetune.errors import ServetuneError
from servetune.sim.scheduler import Scheduler, SchedulerLimits, SimRequest, StepPlan, TokenEvent
from servetune.sim.steptime import StepTimeModel


@dataclass(frozen=True)
class StepOutcome:
    """One step: its plan, its duration in simulated seconds, and the tokens it produced."""

    plan: StepPlan
    duration: float
    events: list[TokenEvent]


class SimEngine:
    """Steps the scheduler and prices each step."""

    def __init__(self, limits: SchedulerLimits, timing: StepTimeModel) -> None:
        self.scheduler = Scheduler(limits)
        self.timing = timing
        self.num_steps = 0

    @property
    def limits(self) -> SchedulerLimits:
        return self.scheduler.limits

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def submit(self, request: SimRequest) -> None:
        self.scheduler.add(request)

    def step(self) -> StepOutcome:
        """Plans, prices and applies one step. Raises when work exists but nothing can ever run."""
        plan = self.scheduler.schedule()
        if plan.empty:
            if not self.scheduler.running and self.scheduler.waiting:
                head = self.scheduler.waiting[0]
                raise ServetuneError(
                    f"request {head.request_id} ({head.num_tokens} tokens) cannot get KV blocks even with "
                    f"nothing else running ({self.limits.num_blocks} blocks of {self.limits.block_size} tokens)",
                    "lower max_model_len or give the KV cache more memory (gpu-memory-utilization, TP)",
                )
            return StepOutcome(plan, 0.0, [])
        duration = self.timing.step_time(plan)
        events = self.scheduler.finish_step(plan)
        self.num_steps += 1
        return StepOutcome(plan, duration, events)
