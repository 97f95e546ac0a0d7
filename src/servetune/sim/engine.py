"""The simulated engine core: a scheduler plus a step-time model, advanced one step at a time.

Both drivers use it: `virtual.py` (the in-process backend, `estimate`, calibration) jumps a virtual clock from
step to step (thousands of times faster than real time), `server.py` sleeps each step's duration (optionally
scaled) and streams the tokens.
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
    """Steps the scheduler and prices each step.

    With `limits.async_scheduling` (vLLM's default since about 0.20, logged as "Asynchronous scheduling is
    enabled"), the scheduler plans step k+1 while step k runs on the GPU, so a request that arrives
    during step k is first scheduled in step k+2: under load its TTFT carries about one more step than
    with the synchronous scheduler. An idle engine schedules a new request at once either way.
    """

    def __init__(self, limits: SchedulerLimits, timing: StepTimeModel) -> None:
        self.scheduler = Scheduler(limits)
        self.timing = timing
        self.num_steps = 0
        self._inbox: list[tuple[int, SimRequest]] = []  # (steps started when it arrived, request)

    @property
    def limits(self) -> SchedulerLimits:
        return self.scheduler.limits

    @property
    def has_work(self) -> bool:
        return bool(self._inbox) or self.scheduler.has_work

    def submit(self, request: SimRequest) -> None:
        """A request reaches the engine now; it is scheduled at the next step it may join."""
        self.scheduler.check(request)
        self._inbox.append((self.num_steps, request))

    def abort(self, request_id: str) -> None:
        """Drops a request wherever it is (not yet admitted, waiting or running): its client went away."""
        self._inbox = [(tag, req) for tag, req in self._inbox if req.request_id != request_id]
        self.scheduler.abort(request_id)

    def quiet_decode_steps(self) -> int:
        """The scheduler's quiet decode stretch, none while a request waits to join."""
        return 0 if self._inbox else self.scheduler.quiet_decode_steps()

    def _admit(self) -> None:
        """Hands arrived requests to the scheduler: all of them, or under async scheduling only those that
        arrived before the previous step was planned (unless the engine is idle)."""
        if not self._inbox:
            return
        idle = not self.scheduler.running and not self.scheduler.waiting
        cutoff = self.num_steps - 1 if self.limits.async_scheduling and not idle else self.num_steps
        keep = []
        for tag, req in self._inbox:
            if tag <= cutoff:
                self.scheduler.add(req)
            else:
                keep.append((tag, req))
        self._inbox = keep

    def step(self) -> StepOutcome:
        """Plans, prices and applies one step. Raises when work exists but nothing can ever run."""
        self._admit()
        plan = self.scheduler.schedule()
        if plan.empty:
            if not self.scheduler.running and self.scheduler.waiting:
                head = self.scheduler.waiting[0]
                raise ServetuneError(
                    f"request {head.request_id} ({head.num_tokens} tokens) cannot get KV blocks even with "
                    f"nothing else running ({self.limits.num_blocks} blocks of {self.limits.block_size} tokens)",
                    "lower max_model_len or give the KV cache more memory (gpu-memory-utilization, TP)",
                )
            self.num_steps += 1
            return StepOutcome(plan, 0.0, [])
        duration = self.timing.step_time(plan)
        events = self.scheduler.finish_step(plan)
        self.num_steps += 1
        return StepOutcome(plan, duration, events)
