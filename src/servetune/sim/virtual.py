"""Load through the simulated engine on a virtual clock: no sleeping, no HTTP, `RequestRecord`s in simulated ns.

`VirtualServer` is a simulated vLLM that lives as long as its owner: its engine (KV pool, prefix cache,
counters), its `/metrics` figures and its clock carry over from one run to the next, as a real server's do.
`run` drives one `LoadShape` the way servetune's load generator drives a live server, phases and bounds decided
by the same rule (`load.shape.Phaser`): a closed loop of `concurrency` conversations (each worker starts the
next one when its conversation ends), or open-loop arrivals at the live runner's times (`LoadShape.arrivals`),
at most `max_concurrency` in flight; a conversation's turns follow each other's answers. A request reaches the
scheduler once the API server has parsed and tokenized it (`StepTimeModel.api_time`, one request at a time), its
tokens reach the client when the engine delivers them (`engine.py`: with async scheduling, after the next step is
launched). The engine takes requests in between steps, as vLLM's engine-core loop does: a request's queue interval
in the simulated `/metrics` starts at the first step planned after it arrived, so a request that arrives during a
step counts the rest of that step in the API server's part of TTFT, where vLLM counts it. The client's first-token
and whole-request timeouts apply (the inter-token one does not: it would cost a deadline per token, and a
simulated step never stalls for two minutes). As in the live runner, the warm-up and cool-down conversations
still in flight when the last measured one ends are dropped unrecorded (and aborted in the engine).

Requests are described by length (`VirtualTurn`): token ids for text prompts, or segments of content for
synthetic ones (`(key, tokens)`: equal keys stand for equal text), hashed block by block so that a shared
system prompt or a conversation's history hits the prefix cache exactly where the same text would.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from servetune.errors import ServetuneError
from servetune.load.shape import LoadShape, Phaser
from servetune.metrics.engine_time import EngineTime, Occupancy, engine_time
from servetune.metrics.prometheus import MetricsSnapshot, parse
from servetune.metrics.record import ErrorClass, Phase, RequestRecord
from servetune.sim.engine import SimEngine, StepOutcome
from servetune.sim.kvcache import block_hashes
from servetune.sim.metrics import ServerStats, interval_snapshot, render
from servetune.sim.scheduler import SimRequest
from servetune.sim.steptime import StepTimeModel

if TYPE_CHECKING:
    from servetune.sim.deployment import SimDeployment
    from servetune.sim.steptime import StepCoefficients

Segment = tuple[Hashable, int]
"""A run of prompt tokens: (what they are, how many). Equal keys at equal offsets are equal tokens."""

MAX_INSTANT_REJECTIONS = 100_000
"""Requests rejected in a row without the clock moving: beyond this a closed loop bounded by duration only would
never end (every request fails at once), so the run stops with an error instead."""
MAX_EMPTY_STEPS = 1_000
"""Steps in a row that schedule nothing: the engine cannot make progress (a bug, not a workload)."""


def segment_hashes(segments: Sequence[Segment], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the full blocks of a prompt given as segments (as `kvcache.block_hashes` for ids)."""
    hashes: list[int] = []
    parent = 0
    piece: list[tuple[Hashable, int, int]] = []
    filled = 0
    for key, length in segments:
        offset = 0
        while offset < length:
            take = min(length - offset, block_size - filled)
            piece.append((key, offset, offset + take))
            offset += take
            filled += take
            if filled == block_size:
                parent = hash((parent, tuple(piece)))
                hashes.append(parent)
                piece, filled = [], 0
    return tuple(hashes)


@dataclass(frozen=True, slots=True)
class VirtualTurn:
    """One request as the engine sees it: prompt length (chat template included), requested output (None: what
    the context leaves), the client's own count of its input, and its content for the prefix cache."""

    prompt_tokens: int
    max_tokens: int | None
    expected_tokens: int | None
    segments: tuple[Segment, ...] = ()
    ids: tuple[int, ...] | None = None

    def block_hashes(self, block_size: int) -> tuple[int, ...]:
        if self.ids is not None:
            return block_hashes(self.ids, block_size)
        return segment_hashes(self.segments, block_size)


@dataclass(frozen=True, slots=True)
class VirtualConversation:
    """Conversation `index` of a workload (traffic class `cls`): its turns, sent one after another's answer."""

    index: int
    cls: str
    turns: tuple[VirtualTurn, ...]


ConversationSource = Callable[[int], VirtualConversation]


@dataclass
class Occupied:
    """The running and waiting requests over one run, as vLLM's two gauges would show them if read continuously:
    their time integrals (request-seconds) and peaks."""

    seconds: float = 0.0
    running_s: float = 0.0
    waiting_s: float = 0.0
    running_max: int = 0
    waiting_max: int = 0

    def add(self, running: int, waiting: int, seconds: float) -> None:
        self.seconds += seconds
        self.running_s += running * seconds
        self.waiting_s += waiting * seconds
        self.running_max = max(self.running_max, running)
        self.waiting_max = max(self.waiting_max, waiting)


class VirtualServer:
    """A simulated vLLM on a virtual clock (see the module docstring)."""

    def __init__(self, deployment: SimDeployment, coefficients: StepCoefficients | None = None) -> None:
        timing = deployment.timing
        if coefficients is not None:
            timing = StepTimeModel.of(timing.costs, timing.gpu, coefficients)
        self.deployment = deployment
        self.engine = SimEngine(deployment.limits, timing)
        self.stats = ServerStats()
        self.clock = 0.0
        """Simulated seconds since the server started."""
        self.ids = itertools.count()
        self.occupancy = Occupied()
        """The last run's (`run` starts a new one)."""
        self._api_free = 0.0
        self._timing = timing

    def parsed(self, sent: float, prompt_tokens: int) -> float:
        """When the API server has parsed and tokenized a request of `prompt_tokens` sent at `sent`: it takes one
        request at a time (`StepTimeModel.api_time` each), so a burst reaches the engine spread out."""
        self._api_free = max(self._api_free, sent) + self._timing.api_time(prompt_tokens)
        return self._api_free

    def snapshot(self, model: str | None = None, *, intervals_only: bool = False) -> MetricsSnapshot:
        """The simulated `/metrics` now, as a scrape reads it (`model`: the served name in its labels);
        `intervals_only`: only the request-interval histograms the TTFT's split reads, taken from the server's
        counts without the text (`metrics.interval_snapshot`) — a fit that replays hundreds of runs reads only those."""
        if intervals_only:
            return interval_snapshot(self.stats, self.deployment.label, self.clock)
        text = render(self.stats, self.engine.scheduler, model or self.deployment.served_name)
        return parse(text, url=self.deployment.label, taken_s=self.clock)

    def engine_time(
        self, before: MetricsSnapshot, records: Sequence[RequestRecord], *, intervals_only: bool = False
    ) -> EngineTime | None:
        """The last run's TTFT split from the simulated `/metrics` (`before` it, and now), read as vLLM's is; the
        running and waiting requests are exact time averages over the run, not samples. `intervals_only`: the
        split's intervals only (see `snapshot`)."""
        split = engine_time(before, self.snapshot(intervals_only=intervals_only), records)
        occupied = self.occupancy
        if split is None or not occupied.seconds:
            return split
        return split.model_copy(
            update={
                "running": Occupancy(mean=occupied.running_s / occupied.seconds, max=occupied.running_max, samples=0),
                "waiting": Occupancy(mean=occupied.waiting_s / occupied.seconds, max=occupied.waiting_max, samples=0),
            }
        )

    def run(
        self, source: ConversationSource, shape: LoadShape, *, stream: bool = True, trace: RunTrace | None = None
    ) -> list[RequestRecord]:
        """Every request of one load shape (warm-up and cool-down included, marked by phase), in send order;
        `trace` records where each request's time went (`servetune estimate --explain`)."""
        self.occupancy = Occupied()
        return _Run(self, source, shape, stream, trace).execute()


@dataclass
class RunTrace:
    """What a run did step by step, for explaining a request's TTFT (`sim/explain.py`): each request's
    (conversation index, turn), the moment the engine got it and the moment its loop took it in (the next
    planning), and every planned step that carried prompt tokens: when it was planned, how long until the next
    planning, how many requests it also decoded, and whose prompt chunks it carried (request id -> tokens)."""

    requests: dict[str, tuple[int, int]] = field(default_factory=dict)
    arrived: dict[str, float] = field(default_factory=dict)
    taken_in: dict[str, float] = field(default_factory=dict)
    steps: list[tuple[float, float, int, dict[str, int]]] = field(default_factory=list)
    """(planned at, seconds to the next planning, decodes in it, prompt tokens per request id)."""


@dataclass(eq=False, slots=True)
class _Conversation:
    conv: VirtualConversation
    phase: Phase


@dataclass(eq=False, slots=True)
class _Flight:
    """A request sent and not yet ended."""

    rid: str
    owner: _Conversation
    turn: int
    scheduled: float
    dispatched: float
    sent: float
    budget: int
    chunks: list[float] = field(default_factory=list)
    tokens: int = 0
    arrived: float | None = None
    """When the engine got it (after the API server)."""
    queued: float | None = None
    """When the engine's loop took it in: the first step planned after it arrived (vLLM's QUEUED stamp)."""
    first_scheduled: float | None = None


_ARRIVE, _DISPATCH, _REJECT, _FIRST_DEADLINE, _END_DEADLINE = range(5)
_DEFAULTS = {
    name: info.get_default(call_default_factory=True)
    for name, info in RequestRecord.model_fields.items()
    if not info.is_required()
}


def _ns(t: float) -> int:
    return round(t * 1e9)


class _Run:
    """One `VirtualServer.run`: client events on a heap (arrivals at the scheduler, open-loop dispatches, timeout
    deadlines), the engine stepped in between."""

    def __init__(
        self,
        server: VirtualServer,
        source: ConversationSource,
        shape: LoadShape,
        stream: bool,
        trace: RunTrace | None = None,
    ) -> None:
        self.server = server
        self.trace = trace
        self.engine = server.engine
        self.deployment = server.deployment
        self.source = source
        self.shape = shape
        self.stream = stream
        self.phaser = Phaser(shape)
        self.t0 = self.clock = server.clock
        self.first_s = shape.timeouts.first_token_s
        self.whole_s = shape.timeouts.request_s
        self.events: list[tuple[float, int, int, Any]] = []
        self.seq = itertools.count()
        self.flights: dict[str, _Flight] = {}
        self.records: list[RequestRecord] = []
        self.active = 0
        self.measuring = 0
        self.next_index = 0
        self.closed = shape.kind == "concurrency"
        self.dispatching = not self.closed
        self.offsets: np.ndarray = np.zeros(0)
        self.queued: deque[tuple[int, Phase, float]] = deque()
        self.rejections = 0
        self.empty_steps = 0

    # ------------------------------------------------------------------ the loop
    def execute(self) -> list[RequestRecord]:
        try:
            if self.closed:
                for start in self.shape.stream_starts():
                    if not self._worker_next(self.t0 + start):
                        break
            else:
                self._dispatch_next()
            self._loop()
        finally:
            for rid in list(self.flights):
                self.engine.abort(rid)
            self.server.clock = self.clock
        return sorted(self.records, key=lambda r: (r.sent_ns, r.index, r.turn))

    def _done(self) -> bool:
        return self.active == 0 if self.closed else not self.dispatching and self.measuring == 0

    def _loop(self) -> None:
        engine = self.engine
        while not self._done():
            self._due(self.clock, inclusive=True)
            if self._done():
                break
            if not engine.has_work:
                if not self.events:
                    raise RuntimeError("virtual run: conversations in flight but nothing left to happen")
                idle = max(self.clock, self.events[0][0])
                self.server.occupancy.add(0, 0, idle - self.clock)
                self.clock = idle
                continue
            quiet = engine.quiet_decode_steps()
            if quiet > 1 and self._fast_forward(quiet):
                continue
            self._step()

    def _push(self, t: float, kind: int, item: Any) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, item))

    def _due(self, until: float, *, inclusive: bool) -> None:
        """Handles the client events up to `until` (in time order)."""
        events = self.events
        while events and (events[0][0] <= until if inclusive else events[0][0] < until):
            t, _, kind, item = heapq.heappop(events)
            if kind == _ARRIVE:
                self._arrive(item, t)
                if self.trace is not None:
                    self.trace.arrived[item] = t
            elif kind == _DISPATCH:
                self._dispatch(item, t)
            elif kind == _REJECT:
                flight, problem = item
                self._failed(flight, t, ErrorClass.HTTP_4XX, f"HTTP 400: {problem}", status=400)
            else:
                self._deadline(item, kind, t)

    def _horizon(self) -> float:
        """When the next client event happens (stale deadlines of ended requests are dropped first)."""
        events = self.events
        while events and events[0][2] >= _FIRST_DEADLINE and events[0][3] not in self.flights:
            heapq.heappop(events)
        return events[0][0] if events else math.inf

    def _fast_forward(self, steps: int) -> bool:
        """Applies up to `steps` quiet decode steps in one go, none planned at or after the next client event
        (which the scheduler must see first); False when none fits."""
        running = list(self.engine.scheduler.running)
        start = self.clock
        times = self.engine.fast_forward(steps, self._horizon() - start)
        if not times:
            return False
        for req in running:
            flight = self.flights[req.request_id]
            flight.chunks.extend(start + t for t in times)
            flight.tokens += len(times)
        self.server.stats.iteration(len(running), len(times))
        self.server.occupancy.add(len(running), 0, times[-1])
        self.clock = start + times[-1]
        return True

    def _step(self) -> None:
        start = self.clock
        try:
            outcome = self.engine.step()
        except ServetuneError as err:  # the head request can never get its blocks: end it, as sim-serve does
            head = self.engine.scheduler.waiting[0]
            self.engine.abort(head.request_id)
            flight = self.flights.pop(head.request_id)
            self._failed(flight, start, ErrorClass.ERROR_EVENT, err.problem)
            return
        for rid in outcome.taken_in:
            taken = self.flights.get(rid)
            if taken is not None:
                taken.queued = start
                if self.trace is not None:
                    self.trace.taken_in[rid] = start
        if outcome.plan.empty and not outcome.events:
            self.empty_steps += 1
            if self.empty_steps > MAX_EMPTY_STEPS:
                raise RuntimeError("virtual run: the engine schedules nothing but has work")
            return
        self.empty_steps = 0
        flights = self.flights
        # Requests scheduled for the first time were admitted last (after the running ones and after preempted ones
        # coming back), so walking the plan backwards can stop at the first one seen before.
        for s in reversed(outcome.plan.scheduled):
            joined = flights.get(s.request.request_id)
            if joined is None:
                continue
            if joined.first_scheduled is not None:
                break
            joined.first_scheduled = start
        end = start + outcome.duration
        scheduler = self.engine.scheduler
        self.server.occupancy.add(len(scheduler.running), len(scheduler.waiting), outcome.duration)
        if self.trace is not None:
            self._trace(start, outcome)
        self._due(end, inclusive=False)  # what the client does during the step happens before its tokens arrive
        self.clock = end
        delivered = 0
        for req, num_tokens, reason in outcome.events:
            delivered += num_tokens
            got = flights.get(req.request_id)
            if got is None:
                continue
            if not got.chunks:  # vLLM counts a prompt's computed tokens in the iteration of its first token
                delivered += req.num_prompt_tokens - req.num_cached_prompt_tokens
            got.chunks.append(end)
            got.tokens += num_tokens
            if reason:
                self._finished(got, end, reason)
        if outcome.events:
            self.server.stats.iteration(delivered)

    def _trace(self, start: float, outcome: StepOutcome) -> None:
        """Records a planned step (see `RunTrace`)."""
        assert self.trace is not None
        plan = outcome.plan
        chunks = {s.request.request_id: s.num_new_tokens for s in plan.scheduled if s.prefill}
        if chunks:
            self.trace.steps.append((start, outcome.duration, plan.num_decode, chunks))

    # ------------------------------------------------------------------ the client
    def _worker_next(self, t: float) -> bool:
        """A closed-loop worker is free at `t`: it starts the next conversation, or retires (False)."""
        phase = self.phaser.next(t - self.t0)
        if phase is None:
            return False
        self._start(self.next_index, phase, t, t, t)
        self.next_index += 1
        return True

    def _dispatch_next(self) -> None:
        """Schedules the next open-loop arrival (its phase decided now: it depends on its time only)."""
        index = self.next_index
        if index >= len(self.offsets):
            self.offsets = self.shape.arrivals(max(4096, 4 * len(self.offsets)))
        offset = float(self.offsets[index])
        phase = self.phaser.next(offset)
        if phase is None:
            self.dispatching = False
            return
        self.next_index += 1
        self._push(self.t0 + offset, _DISPATCH, (index, phase))

    def _dispatch(self, item: tuple[int, Phase], t: float) -> None:
        index, phase = item
        cap = self.shape.max_concurrency
        if cap is None or self.active < cap:
            self._start(index, phase, t, t, t)
        else:
            self.queued.append((index, phase, t))
        self._dispatch_next()

    def _start(self, index: int, phase: Phase, scheduled: float, dispatched: float, sent: float) -> None:
        conv = self.source(index)
        self.active += 1
        if phase == "measure":
            self.measuring += 1
        self._send(_Conversation(conv, phase), 0, scheduled, dispatched, sent)

    def _send(self, owner: _Conversation, k: int, scheduled: float, dispatched: float, t: float) -> None:
        turn = owner.conv.turns[k]
        budget, problem = self.deployment.check_request(turn.prompt_tokens, turn.max_tokens)
        flight = _Flight(str(next(self.server.ids)), owner, k, scheduled, dispatched, t, budget)
        if self.trace is not None:
            self.trace.requests[flight.rid] = (owner.conv.index, k)
        if problem is not None:
            self.rejections += 1
            if self.rejections > MAX_INSTANT_REJECTIONS:
                raise ServetuneError(f"every request is rejected by the simulated server: {problem}", _REJECT_FIX)
            self._push(self.server.parsed(t, turn.prompt_tokens), _REJECT, (flight, problem))  # answered once parsed
            return
        self.flights[flight.rid] = flight
        self._push(self.server.parsed(t, turn.prompt_tokens), _ARRIVE, flight.rid)
        if math.isfinite(self.first_s):
            self._push(t + self.first_s, _FIRST_DEADLINE, flight.rid)
        if math.isfinite(self.whole_s):
            self._push(t + self.whole_s, _END_DEADLINE, flight.rid)

    def _arrive(self, rid: str, t: float) -> None:
        flight = self.flights.get(rid)
        if flight is None:  # timed out before the server saw it
            return
        flight.arrived = t
        turn = flight.owner.conv.turns[flight.turn]
        hashes = turn.block_hashes(self.deployment.limits.block_size)
        self.engine.submit(SimRequest(rid, turn.prompt_tokens, flight.budget, hashes))

    def _deadline(self, rid: str, kind: int, t: float) -> None:
        flight = self.flights.get(rid)
        if flight is None or (kind == _FIRST_DEADLINE and flight.chunks):
            return
        del self.flights[rid]
        self.engine.abort(rid)
        flight.chunks = [c for c in flight.chunks if c <= t]  # a fast-forward may have run past the deadline
        if kind == _FIRST_DEADLINE:
            self._failed(flight, t, ErrorClass.FIRST_TOKEN_TIMEOUT, f"no output within {self.first_s} s")
        else:
            cls = ErrorClass.INTER_TOKEN_TIMEOUT if flight.chunks else ErrorClass.FIRST_TOKEN_TIMEOUT
            self._failed(flight, t, cls, f"no end after {self.whole_s} s")

    def _finished(self, flight: _Flight, t: float, reason: str) -> None:
        del self.flights[flight.rid]
        self.rejections = 0
        turn = flight.owner.conv.turns[flight.turn]
        chunks = np.asarray(flight.chunks)
        first, scheduled = float(chunks[0]), flight.first_scheduled
        self.server.stats.first_token(first - flight.sent)
        self.server.stats.token_gaps(np.diff(chunks))
        self.server.stats.finished(
            reason,
            e2e_s=t - flight.sent,
            decode_s=t - first,
            tokens=flight.tokens,
            queue_s=None if scheduled is None else scheduled - (flight.queued or flight.arrived or flight.sent),
            prompt_tokens=turn.prompt_tokens,
            prefill_s=None if scheduled is None else first - scheduled,
        )
        self._record(flight, t, http_status=200, finish_reason=reason, output_tokens=flight.tokens, usage=True)
        owner = flight.owner
        if flight.turn + 1 < len(owner.conv.turns):
            self._send(owner, flight.turn + 1, t, t, t)  # the next turn follows the answer at once
        else:
            self._ended(owner, t)

    def _failed(self, flight: _Flight, t: float, cls: ErrorClass, message: str, *, status: int | None = None) -> None:
        self._record(
            flight, t, http_status=status or 200, output_tokens=len(flight.chunks), error_class=cls, error=message
        )
        self._ended(flight.owner, t)

    def _ended(self, owner: _Conversation, t: float) -> None:
        """A conversation is over (its last answer, or a failed turn): its worker or slot goes on."""
        self.active -= 1
        if owner.phase == "measure":
            self.measuring -= 1
        if self.closed:
            self._worker_next(t)
        elif self.queued:
            index, phase, scheduled = self.queued.popleft()
            self._start(index, phase, scheduled, scheduled, t)

    def _record(
        self,
        flight: _Flight,
        done: float,
        *,
        http_status: int,
        output_tokens: int,
        usage: bool = False,
        finish_reason: str | None = None,
        error_class: ErrorClass | None = None,
        error: str | None = None,
    ) -> None:
        conv = flight.owner.conv
        turn = conv.turns[flight.turn]
        chunk_ns = np.rint(np.asarray(flight.chunks) * 1e9).astype(np.int64).tolist() if self.stream else []
        self.records.append(
            RequestRecord.model_construct(
                **{
                    **_DEFAULTS,
                    "index": conv.index,
                    "traffic_class": conv.cls,
                    "phase": flight.owner.phase,
                    "conversation": conv.index,
                    "turn": flight.turn,
                    "scheduled_ns": _ns(flight.scheduled),
                    "dispatched_ns": _ns(flight.dispatched),
                    "sent_ns": _ns(flight.sent),
                    "done_ns": _ns(done),
                    "chunk_ns": chunk_ns,
                    "first_content_ns": chunk_ns[0] if chunk_ns else None,
                    "stream": self.stream,
                    "http_status": http_status,
                    "finish_reason": finish_reason,
                    "error_class": error_class,
                    "error": error,
                    "prompt_tokens_expected": turn.expected_tokens,
                    "prompt_tokens": turn.prompt_tokens if usage else None,
                    "output_tokens_requested": turn.max_tokens,
                    "output_tokens": output_tokens,
                    "output_tokens_source": "usage" if usage else ("chunks" if output_tokens else "none"),
                    "usage_output_tokens": output_tokens if usage else None,
                }
            )
        )


_REJECT_FIX = "shorten the requests (input + output tokens) or serve a longer context (--max-model-len)"
