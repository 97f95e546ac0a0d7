"""The coordinator of a run spread over worker processes: it owns the load, the workers only send.

One place decides everything that makes a run what was asked, so that N workers give the run one process
would give, without its CPU limit:
- the arrival schedule (open loop): computed once from the seed (`shape.open_schedule`) and handed out ahead of
  time (`LOOKAHEAD_S`), each arrival to the least loaded worker, with its absolute send time; every worker
  waits for that time on the one monotonic clock of the host, so the merged stream is the requested process;
- the concurrency budget (closed loop, and the cap of an open loop): one counter here, a conversation is handed
  out only when a slot is free and the slot comes back when its worker reports the conversation finished, so the
  requests in flight never exceed the budget, whatever the number of workers;
- warm-up, count and duration stops (the one `Phaser`), the records (merged as they arrive, for the live
  progress and `on_record`) and the end of the run;
- workers that die or freeze: reported by cause, each conversation they had in flight recorded as a failed
  `worker_lost` request (never silently lost), its slot given to the workers left.
The transport is a `WorkerLink` (`transport.py`): local processes (`transport.LocalWorker`) or Ray actors on
other machines (`ray_transport.RayWorker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from servetune.load.monitor import LoopSamples
from servetune.load.prompts import Conversation, RequestFactory
from servetune.load.shape import LoadShape, Phaser, open_schedule
from servetune.load.transport import WorkerGone, WorkerLink
from servetune.metrics.record import ErrorClass, Phase, RequestRecord

LOOKAHEAD_S = 0.05  # open-loop arrivals go to their worker this long before they are due
SILENT_S = 15.0  # a worker that sends nothing (not even its heartbeat) for this long is declared lost
STOP_S = 10.0  # how long the workers get to cancel, report and say goodbye at the end
_now = time.monotonic_ns


class Supply:
    """Conversation `i` of the workload: built before the clock starts where it can be, on demand after."""

    def __init__(self, factory: RequestFactory) -> None:
        self.factory = factory
        self._built: dict[int, Conversation] = {}

    async def get(self, index: int) -> Conversation:
        conv = self._built.pop(index, None)
        return conv if conv is not None else await self.factory.conversation(index)

    async def prebuild(self, n: int) -> None:
        """Builds the first conversations before the clock starts, so prompt building is not in the timeline."""
        for i in range(n):
            self._built[i] = await self.factory.conversation(i)


@dataclass
class _Flight:
    conv: Conversation
    phase: Phase
    worker: int
    scheduled_ns: int
    turns_done: int = 0


class Coordinator:
    """Drives `shape` over `links` (workers already set up and ready); `records` fills as they report."""

    def __init__(
        self,
        links: list[WorkerLink],
        supply: Supply,
        shape: LoadShape,
        on_record: Callable[[RequestRecord], None] | None,
    ) -> None:
        self.links = links
        self.supply = supply
        self.shape = shape
        self.on_record = on_record
        self.phaser = Phaser(shape)
        self.records: list[RequestRecord] = []
        self.alive = set(range(len(links)))
        self.load = [0] * len(links)
        self.flights: dict[int, _Flight] = {}
        self.lost: list[str] = []
        self.samples: dict[int, LoopSamples] = {}
        budget = shape.concurrency if shape.kind == "concurrency" else shape.max_concurrency
        self.free: int | None = budget
        self.slot = asyncio.Event()
        self.measuring = 0
        self.measured_done = asyncio.Event()
        self.seen = [_now()] * len(links)
        self.start_ns = 0
        self._stopping: set[asyncio.Task] = set()

    async def run(self) -> None:
        """The whole run: drive, wait for the measured conversations, stop the workers, collect their samples."""
        readers = [asyncio.ensure_future(self._read(i)) for i in range(len(self.links))]
        guard = asyncio.ensure_future(self._watch())
        self.start_ns = _now()
        try:
            await (self._closed() if self.shape.kind == "concurrency" else self._open())
            while self.measuring and self.alive:
                self.measured_done.clear()
                await self.measured_done.wait()
            for i in self.alive:
                self.links[i].send("stop")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), STOP_S)
        finally:
            guard.cancel()
            for task in readers:
                task.cancel()
            await asyncio.gather(*(link.stop(grace_s=2.0) for link in self.links), return_exceptions=True)

    # -- issuing -----------------------------------------------------------------------------------------------

    def _pick(self) -> int | None:
        return min(self.alive, key=self.load.__getitem__) if self.alive else None

    def _hand_out(self, conv: Conversation, phase: Phase, scheduled_ns: int, dispatched_ns: int) -> int | None:
        """Registers a conversation on the least loaded worker; returns that worker (None: no worker is left)."""
        w = self._pick()
        if w is None:
            return None
        self.flights[conv.index] = _Flight(conv, phase, w, scheduled_ns)
        self.load[w] += 1
        if phase == "measure":
            self.measuring += 1
        if self.free is not None:
            self.free -= 1
        return w

    async def _slot(self) -> None:
        while self.free is not None and self.free <= 0:
            self.slot.clear()
            await self.slot.wait()

    async def _ramp(self, starts: list[float]) -> None:
        """The budget of a closed loop grows by one stream at each start time (`LoadShape.stream_starts`): a
        stream that ends during the ramp is replaced at once, as a stream of the in-process loop goes on."""
        for start in starts:
            wait = start - (_now() - self.start_ns) / 1e9
            if wait > 0:
                await asyncio.sleep(wait)
            assert self.free is not None
            self.free += 1
            self.slot.set()

    async def _closed(self) -> None:
        self.free = 0
        ramp = asyncio.ensure_future(self._ramp(self.shape.stream_starts()))
        try:
            await self._closed_loop()
        finally:
            ramp.cancel()

    async def _closed_loop(self) -> None:
        index = 0
        while self.alive:
            await self._slot()
            phase = self.phaser.next((_now() - self.start_ns) / 1e9)
            if phase is None:
                return
            conv = await self.supply.get(index)
            index += 1
            now = _now()
            w = self._hand_out(conv, phase, now, 0)
            if w is None:
                return
            self.links[w].send("go", [(conv, phase, now, 0)])

    async def _open(self) -> None:
        capped = self.free is not None
        batches: dict[int, list] = {}
        ahead_ns = 0 if capped else int(LOOKAHEAD_S * 1e9)
        for index, t, phase in open_schedule(self.shape, self.phaser):
            if not self.alive:
                return
            scheduled = self.start_ns + int(t * 1e9)
            wait = (scheduled - ahead_ns - _now()) / 1e9
            if wait > 0:
                self._send_batches(batches)
                await asyncio.sleep(wait)
            conv = await self.supply.get(index)
            if capped:
                dispatched = _now()  # as in one process: waiting for a slot is not lateness
                await self._slot()
                w = self._hand_out(conv, phase, scheduled, dispatched)
                if w is not None:
                    self.links[w].send("go", [(conv, phase, scheduled, dispatched)])
                continue
            w = self._hand_out(conv, phase, scheduled, 0)
            if w is not None:
                batches.setdefault(w, []).append((conv, phase, scheduled, 0))
                if len(batches[w]) >= 256:
                    self._send_batches(batches)
        self._send_batches(batches)

    def _send_batches(self, batches: dict[int, list]) -> None:
        for w, items in batches.items():
            if items:
                self.links[w].send("go", items)
        batches.clear()

    # -- receiving ---------------------------------------------------------------------------------------------

    async def _read(self, w: int) -> None:
        link = self.links[w]
        while True:
            try:
                message = await link.receive()
            except WorkerGone as gone:
                self._lose(w, str(gone))
                return
            if w not in self.alive:
                return  # declared lost while silent: what it sends now was already counted as failed
            self.seen[w] = _now()
            kind = message[0]
            if kind == "records":
                self._records(message[1], message[2])
            elif kind == "bye":
                self.samples[w] = message[1]
                self.alive.discard(w)
                return

    def _records(self, records: list[RequestRecord], finished: list[int]) -> None:
        for rec in records:
            flight = self.flights.get(rec.index)
            if flight is not None:
                flight.turns_done += 1
            self.records.append(rec)
            if self.on_record is not None:
                self.on_record(rec)
        for index in finished:
            flight = self.flights.pop(index, None)
            if flight is not None:
                self._release(flight)

    def _release(self, flight: _Flight) -> None:
        self.load[flight.worker] -= 1
        if flight.phase == "measure":
            self.measuring -= 1
            if not self.measuring:
                self.measured_done.set()
        if self.free is not None:
            self.free += 1
            self.slot.set()

    def _lose(self, w: int, cause: str) -> None:
        """A worker ended before saying goodbye: every conversation it had becomes a failed record."""
        if w not in self.alive:
            return
        self.alive.discard(w)
        now = _now()
        lost = [f for f in self.flights.values() if f.worker == w]
        for flight in lost:
            del self.flights[flight.conv.index]
            rec = RequestRecord(
                index=flight.conv.index,
                traffic_class=flight.conv.cls,
                phase=flight.phase,
                conversation=flight.conv.index,
                turn=flight.turns_done,
                scheduled_ns=flight.scheduled_ns,
                dispatched_ns=flight.scheduled_ns,
                sent_ns=min(flight.scheduled_ns, now),
                done_ns=now,
                error_class=ErrorClass.WORKER_LOST,
                error=cause,
            )
            self._records([rec], [])
            self._release(flight)
        measured = sum(f.phase == "measure" for f in lost)
        went_on = (
            f"{len(self.alive)} of {len(self.links)} workers went on"
            if self.alive
            else "no worker was left, so the run stopped there (fewer requests than asked)"
        )
        self.lost.append(
            f"client {cause}, with {len(lost)} conversations in flight ({measured} measured): they are counted as "
            f"failed requests (worker_lost); {went_on}"
        )
        self.measured_done.set()
        self.slot.set()

    async def _watch(self) -> None:
        """Declares a worker lost when it has sent nothing, not even its heartbeat, for `SILENT_S`."""
        while True:
            await asyncio.sleep(1.0)
            now = _now()
            for w in list(self.alive):
                if now - self.seen[w] > SILENT_S * 1e9:
                    self._lose(w, f"{self.links[w].cause()} (silent for {SILENT_S:g} s)")
                    stopping = asyncio.ensure_future(self.links[w].stop(grace_s=1.0))
                    self._stopping.add(stopping)
                    stopping.add_done_callback(self._stopping.discard)
