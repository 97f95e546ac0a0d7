"""The engine's `/metrics` around one load point, for the split of its TTFT (`metrics.engine_time`).

A scrape before the clock starts; the running and waiting requests sampled every `SAMPLE_S` while the load runs
(only those two gauges are parsed, so the sampling costs the client's event loop a fraction of a millisecond); a
scrape after the last request, taken again (`prometheus.settle`) while the engine has accounted for fewer
finished requests than the client completed — vLLM observes a request's histograms just after its last bytes go
out. Every call goes through the control-plane client, with its timeouts; an engine without `/metrics` (or one
that stops answering it) gives no split, never a failed run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from servetune.control.client import ControlClient, ControlError
from servetune.metrics.engine_time import EngineTime, GaugeSample, engine_time, finished_requests
from servetune.metrics.prometheus import NAMES, MetricsSnapshot, parse_only, scrape, settle
from servetune.metrics.record import RequestRecord

SAMPLE_S = 1.0
"""Seconds between two readings of the gauges: every scrape costs vLLM's API server a few milliseconds of the
CPU it also streams tokens with, so once a second; a point shorter than that keeps its before and after only."""
GAUGES = (NAMES["num_requests_running"][0], NAMES["num_requests_waiting"][0])


class EngineWatch:
    """One load point's watch: `start()` before the clock starts, `finish(records)` after the last request,
    `close()` in any case (it stops the sampling and closes the control client's connection)."""

    def __init__(self, control: ControlClient, sample_s: float = SAMPLE_S) -> None:
        self.control = control
        self.sample_s = sample_s
        self.before: MetricsSnapshot | None = None
        self.samples: list[GaugeSample] = []
        self._task: asyncio.Task | None = None
        self._session = contextlib.AsyncExitStack()

    async def _scrape(self) -> MetricsSnapshot | None:
        try:
            return await scrape(self.control)
        except ControlError:
            return None

    async def start(self) -> None:
        """The scrape before; the sampling starts when the engine has the gauges."""
        await self._session.enter_async_context(self.control)  # one kept-alive connection for every call
        self.before = await self._scrape()
        if self.before is not None and any(self.before.values(g) for g in GAUGES):
            self._task = asyncio.ensure_future(self._sample(time.monotonic()))

    def _read(self, snap: MetricsSnapshot, t_s: float) -> None:
        running, waiting = snap.get("num_requests_running"), snap.get("num_requests_waiting")
        self.samples.append(GaugeSample(t_s=round(t_s, 3), running=running, waiting=waiting))

    async def _sample(self, t0: float) -> None:
        """A reading every `sample_s` (the first one after it: a point shorter than that costs the engine no
        scrape while it serves)."""
        while True:
            await asyncio.sleep(self.sample_s)
            try:
                snap = parse_only(await self.control.metrics_text(), GAUGES)
            except ControlError:
                continue  # a slow answer under load: this reading is lost, the next one is tried
            self._read(snap, time.monotonic() - t0)

    async def _stop_sampling(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def close(self) -> None:
        """Stops the sampling and closes the connection (also when the run failed)."""
        await self._stop_sampling()
        await self._session.aclose()

    async def finish(self, records: Sequence[RequestRecord]) -> EngineTime | None:
        """The split of the point's TTFT over its `records` (every phase), None when the engine gave no account."""
        await self._stop_sampling()
        before = self.before
        if before is None:
            return None
        after = await self._scrape()
        if after is None:
            return None
        completed = sum(1 for r in records if r.ok)

        def short(snapshot: MetricsSnapshot) -> bool:
            finished = finished_requests(before, snapshot)
            return finished is not None and finished < completed

        after = await settle(self._scrape, after, short)
        return engine_time(before, after, records, self.samples)
