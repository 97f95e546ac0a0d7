"""Runs a workload through the simulated engine on a virtual clock: no sleeping, no HTTP.

The client side is modelled as servetune's load generator drives a real server: either a closed loop
(`concurrency` requests in flight, the next one sent when one finishes) or given send times (an open
loop, e.g. Poisson arrivals or a measured run's replay). Each request reaches the scheduler
`request_overhead_s` after it is sent (API server parsing and tokenization), and its tokens reach the
client at the end of the step that produced them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from servetune.sim.engine import SimEngine
from servetune.sim.scheduler import SchedulerLimits, SimRequest
from servetune.sim.steptime import StepTimeModel


@dataclass(frozen=True)
class RequestSpec:
    """One request of a simulated workload.

    Prompts are described by length and sharing rather than by text: the first `shared_prefix_tokens`
    tokens are the same for every request of `prefix_group` (a system prompt, a document asked twice),
    the rest is unique to the request.
    """

    num_prompt_tokens: int
    max_tokens: int
    shared_prefix_tokens: int = 0
    prefix_group: int = 0


def prompt_hashes(spec: RequestSpec, index: int, block_size: int) -> tuple[int, ...]:
    """Chained block hashes standing in for the prompt's tokens (shared blocks hash equal)."""
    hashes: list[int] = []
    parent = 0
    for j in range(spec.num_prompt_tokens // block_size):
        shared = (j + 1) * block_size <= spec.shared_prefix_tokens
        parent = hash((parent, "p", spec.prefix_group, j) if shared else (parent, "u", index, j))
        hashes.append(parent)
    return tuple(hashes)


@dataclass
class RequestTimeline:
    """When one simulated request was sent, got each chunk of tokens, and finished (virtual seconds)."""

    index: int
    num_prompt_tokens: int
    sent: float
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    end: float | None = None
    num_preemptions: int = 0
    cached_prompt_tokens: int = 0

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)

    @property
    def ttft(self) -> float:
        return self.chunk_times[0] - self.sent

    @property
    def e2e(self) -> float:
        assert self.end is not None
        return self.end - self.sent


@dataclass(frozen=True)
class VirtualRun:
    """The outcome of a virtual run: per-request timelines and engine totals."""

    timelines: list[RequestTimeline]
    duration: float
    num_steps: int
    num_preemptions: int
    prefix_queries: int
    prefix_hits: int
    max_running: int
    spec_draft_tokens: int
    spec_accepted_tokens: int


def _fast_forward(
    engine: SimEngine,
    timing: StepTimeModel,
    lines: dict[str, RequestTimeline],
    steps: int,
    clock: float,
    horizon: float,
) -> float:
    """Applies up to `steps` quiet decode steps in one go, none starting at or after `horizon` (the next
    arrival, which the scheduler must see first); returns the clock after them."""
    running = engine.scheduler.running
    context = sum(r.num_computed_tokens for r in running)
    times: list[float] = []
    t = clock
    for duration in timing.decode_step_times(len(running), context, steps):
        if t >= horizon:
            break
        t += duration
        times.append(t)
    if times:
        engine.scheduler.advance_decode(len(times))
        engine.num_steps += len(times)
        ones = [1] * len(times)
        for req in running:
            line = lines[req.request_id]
            line.chunk_times.extend(times)
            line.chunk_tokens.extend(ones)
    return t


def run_virtual(
    specs: Sequence[RequestSpec],
    limits: SchedulerLimits,
    timing: StepTimeModel,
    *,
    concurrency: int | None = None,
    send_times: Sequence[float] | None = None,
) -> VirtualRun:
    """Simulates `specs` in order, closed-loop at `concurrency` or open-loop at `send_times`."""
    if (concurrency is None) == (send_times is None):
        raise ValueError("give exactly one of concurrency or send_times")
    if send_times is not None and len(send_times) != len(specs):
        raise ValueError("send_times must have one entry per request")
    engine = SimEngine(limits, timing)
    overhead = timing.coef.request_overhead_s
    lines: dict[str, RequestTimeline] = {}
    arrivals: list[tuple[float, int]] = []  # (time the scheduler sees it, index)
    next_index = 0

    def send(index: int, now: float) -> None:
        heapq.heappush(arrivals, (now + overhead, index))
        spec = specs[index]
        lines[str(index)] = RequestTimeline(index, spec.num_prompt_tokens, sent=now)

    if send_times is not None:
        for i, t in enumerate(send_times):
            send(i, t)
        next_index = len(specs)
    else:
        assert concurrency is not None
        while next_index < min(concurrency, len(specs)):
            send(next_index, 0.0)
            next_index += 1

    clock = 0.0
    max_running = 0
    finished = 0
    while finished < len(specs):
        while arrivals and arrivals[0][0] <= clock:
            _, i = heapq.heappop(arrivals)
            spec = specs[i]
            req = SimRequest(
                request_id=str(i),
                num_prompt_tokens=spec.num_prompt_tokens,
                max_tokens=spec.max_tokens,
                prompt_hashes=prompt_hashes(spec, i, limits.block_size),
            )
            engine.submit(req)
        if not engine.has_work:
            clock = arrivals[0][0]
            continue
        quiet = engine.quiet_decode_steps()
        if quiet > 1:
            horizon = arrivals[0][0] if arrivals else math.inf
            moved = _fast_forward(engine, timing, lines, quiet, clock, horizon)
            if moved > clock:
                clock = moved
                continue
        outcome = engine.step()
        max_running = max(max_running, len(outcome.plan.scheduled))
        clock += outcome.duration
        for req, num_tokens, reason in outcome.events:
            line = lines[req.request_id]
            line.chunk_times.append(clock)
            line.chunk_tokens.append(num_tokens)
            if reason:
                line.end = clock
                line.num_preemptions = req.num_preemptions
                line.cached_prompt_tokens = req.num_cached_prompt_tokens
                finished += 1
                if concurrency is not None and next_index < len(specs):
                    send(next_index, clock)
                    next_index += 1
    c = engine.scheduler.counters
    ordered = [lines[str(i)] for i in range(len(specs))]
    start = min((t.sent for t in ordered), default=0.0)
    return VirtualRun(
        timelines=ordered,
        duration=clock - start,
        num_steps=engine.num_steps,
        num_preemptions=c.preemptions,
        prefix_queries=c.prefix_queries,
        prefix_hits=c.prefix_hits,
        max_running=max_running,
        spec_draft_tokens=c.spec_draft_tokens,
        spec_accepted_tokens=c.spec_accepted_tokens,
    )
