"""The simulated engine core: a scheduler plus a step-time model, advanced one step at a time.

Both drivers use it: `virtual.py` (the in-process backend, `estimate`, calibration) jumps a virtual clock from
step to step (thousands of times faster than real time), `server.py` sleeps each step's duration (optionally
scaled) and streams the tokens.

Each step costs CPU time (schedule, prepare, launch) and GPU time (`steptime.py`). Without async scheduling they
follow each other: a step lasts CPU + GPU and its tokens come out at its end. With async scheduling (vLLM's
default since about 0.20, logged as "Asynchronous scheduling is enabled") vLLM's engine core keeps two steps in
flight: it plans and launches step k+1 while the GPU runs step k, and hands step k's tokens to the API server only
after step k+1 is launched. A step's kernels run as they are launched, so its GPU work overlaps its own launch:
with L the CPU time and G the GPU time of a step,

    plan(k+1) = delivery(k-1)
    gpu_end(k) = max(max(gpu_end(k-1), plan(k)) + G(k), plan(k) + L(k))
    delivery(k) = max(gpu_end(k), plan(k+1) + L(k+1))

A request arriving while step k runs joins step k+2 (step k+1 was planned when step k started); a step that costs
more to launch than to compute (a few prompt tokens: eager attention and Gated-DeltaNet ops) lasts its launch; and
a step's tokens wait for the launch of the next one. The engine holds the one step in flight; `step()` plans the
next one and returns the tokens of the one before, at the moment they are delivered. The scheduler's state moves
on at planning time (vLLM plans k+1 with placeholders for k's tokens), so the decisions are those of the
synchronous scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

from servetune.errors import ServetuneError
from servetune.sim.scheduler import Scheduler, SchedulerLimits, SimRequest, StepPlan, TokenEvent
from servetune.sim.steptime import StepTimeModel


@dataclass(frozen=True)
class StepOutcome:
    """One call of `SimEngine.step`: the step planned now, how long until the next planning (simulated seconds),
    and the tokens delivered at that moment (this step's own without async scheduling, the previous step's with
    it). `taken_in`: the requests this planning took in (those submitted since the last one): vLLM's engine-core
    loop takes its input queue in between steps and stamps a request QUEUED then, so a request's queue interval
    starts at the planning that took it in."""

    plan: StepPlan
    duration: float
    events: list[TokenEvent]
    taken_in: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _InFlight:
    """The step launched last (async scheduling): when its GPU work ends (seconds after the next planning) and the
    tokens it will deliver."""

    gpu_end: float
    events: list[TokenEvent]


class SimEngine:
    """Steps the scheduler and prices each step (see the module docstring for the timing)."""

    def __init__(self, limits: SchedulerLimits, timing: StepTimeModel) -> None:
        self.scheduler = Scheduler(limits)
        self.timing = timing
        self.num_steps = 0
        self._inbox: list[SimRequest] = []
        self._in_flight: _InFlight | None = None

    @property
    def limits(self) -> SchedulerLimits:
        return self.scheduler.limits

    @property
    def has_work(self) -> bool:
        return bool(self._inbox) or self.scheduler.has_work or self._in_flight is not None

    def submit(self, request: SimRequest) -> None:
        """A request reaches the engine now; the next step planned may take it."""
        self.scheduler.check(request)
        self._inbox.append(request)

    def abort(self, request_id: str) -> None:
        """Drops a request wherever it is (not yet planned, waiting or running): its client went away."""
        self._inbox = [req for req in self._inbox if req.request_id != request_id]
        self.scheduler.abort(request_id)

    def quiet_decode_steps(self) -> int:
        """The scheduler's quiet decode stretch: none while a request waits to join, or while the step in flight
        delivers anything but one token to each running request (a finish, speculative tokens)."""
        flight = self._in_flight
        if self._inbox or (
            flight is not None
            and (len(flight.events) != len(self.scheduler.running) or any(n != 1 or r for _, n, r in flight.events))
        ):
            return 0
        if flight is None and self.limits.async_scheduling:
            return 0
        return self.scheduler.quiet_decode_steps()

    def step(self) -> StepOutcome:
        """Plans and prices the next step, applies its outcome to the scheduler, and says how long until the next
        planning and which tokens are delivered then. Raises when work exists but nothing can ever run."""
        taken_in = tuple(req.request_id for req in self._inbox)
        for req in self._inbox:
            self.scheduler.add(req)
        self._inbox = []
        plan = self.scheduler.schedule()
        flight = self._in_flight
        if plan.empty:
            if flight is not None:  # nothing new to launch: the step in flight finishes and delivers
                self._in_flight = None
                return StepOutcome(plan, flight.gpu_end, flight.events, taken_in)
            if not self.scheduler.running and self.scheduler.waiting:
                head = self.scheduler.waiting[0]
                raise ServetuneError(
                    f"request {head.request_id} ({head.num_tokens} tokens) cannot get KV blocks even with "
                    f"nothing else running ({self.limits.num_blocks} blocks of {self.limits.block_size} tokens)",
                    "lower max_model_len or give the KV cache more memory (gpu-memory-utilization, TP)",
                )
            self.num_steps += 1
            return StepOutcome(plan, 0.0, [], taken_in)
        cpu, gpu = self.timing.cpu_time(plan), self.timing.gpu_time(plan)
        events = self.scheduler.finish_step(plan)
        self.num_steps += 1
        if not self.limits.async_scheduling:
            return StepOutcome(plan, cpu + gpu, events, taken_in)
        before = flight.gpu_end if flight is not None else 0.0
        gpu_end = max(before + gpu, cpu)
        duration = max(before, cpu)  # the next planning: this step launched and the one before done
        self._in_flight = _InFlight(gpu_end - duration, events)
        return StepOutcome(plan, duration, flight.events if flight is not None else [], taken_in)

    def fast_forward(self, steps: int, horizon_s: float) -> list[float]:
        """Applies up to `steps` quiet decode steps (see `Scheduler.quiet_decode_steps`) in one go and returns when
        each of their token deliveries happens, in seconds from now (each gives every running request one token),
        none at or after `horizon_s`. This is how `estimate` stays far faster than real time at low concurrency.

        With async scheduling the step in flight delivers first and the last step applied stays in flight."""
        running = self.scheduler.running
        context = sum(r.num_computed_tokens for r in running)
        cpu = self.timing.coef.cpu_step_s
        gpus = self.timing.decode_gpu_times(len(running), context, steps)
        times: list[float] = []
        t = 0.0
        if not self.limits.async_scheduling:
            for gpu in gpus:
                if t >= horizon_s:
                    break
                t += cpu + gpu
                times.append(t)
            self.scheduler.advance_decode(len(times))
            self.num_steps += len(times)
            return times
        flight = self._in_flight
        if flight is None:
            return []
        before = flight.gpu_end
        for gpu in gpus:
            if t >= horizon_s:
                break
            duration = max(before, cpu)
            before = max(before + gpu, cpu) - duration
            t += duration
            times.append(t)
        if times:
            self.scheduler.advance_decode(len(times))
            self.num_steps += len(times)
            self._in_flight = _InFlight(before, [(req, 1, None) for req in running])
        return times
