"""`run_load`: drives a workload against a server in a load shape and returns the records and their summary.

Only asyncio, aiohttp (for /tokenize), pydantic and numpy are needed on this path; rich is imported only for
the live progress display, `tokenizers` only for a local tokenizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import os
import signal
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from servetune.control.client import ControlClient, ControlTimeouts, normalize_base_url
from servetune.errors import ServetuneError
from servetune.load.client import Client, Watchdog
from servetune.load.coordinator import Coordinator, Supply
from servetune.load.engine_watch import EngineWatch
from servetune.load.http1 import Pool
from servetune.load.monitor import (
    LoopMonitor,
    LoopSamples,
    client_process,
    lag_within,
    usable_cores,
    young_collections_only,
)
from servetune.load.prompts import Conversation, RequestFactory
from servetune.load.shape import LoadShape, Phaser, open_schedule
from servetune.load.tokens import LocalTokenizer, make_counter
from servetune.load.transport import LocalPool, WorkerGone, WorkerLink, WorkerPool
from servetune.load.worker import WorkerSetup
from servetune.load.workload import Workload
from servetune.metrics.engine_time import EngineTime
from servetune.metrics.record import Phase, RequestRecord
from servetune.metrics.slo import Slos
from servetune.metrics.steady import settle
from servetune.metrics.summary import Summary, summarize
from servetune.metrics.validity import ClientReport
from servetune.process.interrupts import run_coroutine

STREAMS_PER_WORKER = 32  # default_workers: fewer streams than this per worker buys nothing
SETUP_S = 60.0  # a worker has this long to start, import, and open its connections
T = TypeVar("T")
_now = time.monotonic_ns


class LoadResult(BaseModel):
    """A run: what was asked, every request's record, and the summary of the measured ones."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_url: str
    model: str
    endpoint: Literal["completions", "chat"]
    stream: bool
    tokenizer: str
    shape: LoadShape
    workload: Workload
    started_at: str
    wall_s: float
    records: list[RequestRecord]
    summary: Summary
    engine_time: EngineTime | None = None
    """The engine's own account of the point's TTFT (queue, prefill, API server, HTTP) and its load, from its
    `/metrics` before, during and after (`metrics/engine_time.py`); None when it exposes no such histograms."""

    def to_json(self, *, records: bool = False, indent: int | None = 2) -> str:
        """The run as JSON; per-request records only when asked (they can be large: use write_jsonl)."""
        return self.model_dump_json(indent=indent, exclude=None if records else {"records"})


class _Run:
    """The in-process driver (one worker): arrivals, phases and requests on this process's event loop."""

    def __init__(
        self,
        client: Client,
        supply: Supply,
        shape: LoadShape,
        on_record: Callable[[RequestRecord], None] | None,
    ) -> None:
        self.client = client
        self.supply = supply
        self.shape = shape
        self.phaser = Phaser(shape)
        self.records: list[RequestRecord] = []
        self.on_record = on_record
        self.start_ns = 0
        self.measure_tasks: list[asyncio.Task] = []
        self.other_tasks: set[asyncio.Task] = set()
        self.next_index = 0

    def emit(self, rec: RequestRecord) -> None:
        self.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)

    async def run_conversation(self, conv: Conversation, phase: Phase, scheduled_ns: int, dispatched_ns: int) -> None:
        await self.client.run_conversation(conv, phase, scheduled_ns, dispatched_ns, self.emit)

    def _spawn(self, coro: Coroutine[Any, Any, None], phase: Phase) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        if phase == "measure":
            self.measure_tasks.append(task)
        else:
            self.other_tasks.add(task)
            task.add_done_callback(self.other_tasks.discard)
        return task

    async def closed_loop(self) -> None:
        async def worker(start_s: float) -> None:
            wait = start_s - (_now() - self.start_ns) / 1e9
            if wait > 0:
                await asyncio.sleep(wait)
            while True:
                phase = self.phaser.next((_now() - self.start_ns) / 1e9)
                if phase is None:
                    return
                index = self.next_index
                self.next_index += 1
                conv = await self.supply.get(index)
                now = _now()
                await self._spawn(self.run_conversation(conv, phase, now, now), phase)

        workers = [asyncio.ensure_future(worker(start)) for start in self.shape.stream_starts()]
        await self._finish(workers)

    async def open_loop(self) -> None:
        shape = self.shape
        cap = asyncio.Semaphore(shape.max_concurrency) if shape.max_concurrency else None

        async def capped(conv: Conversation, phase: Phase, scheduled: int, dispatched: int) -> None:
            assert cap is not None
            async with cap:
                await self.run_conversation(conv, phase, scheduled, dispatched)

        async def dispatcher() -> None:
            for index, t, phase in open_schedule(shape, self.phaser):
                scheduled = self.start_ns + int(t * 1e9)
                delay = (scheduled - _now()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                dispatched = _now()
                conv = await self.supply.get(index)
                run = (
                    capped(conv, phase, scheduled, dispatched)
                    if cap
                    else self.run_conversation(conv, phase, scheduled, dispatched)
                )
                self._spawn(run, phase)

        await self._finish([asyncio.ensure_future(dispatcher())])

    async def _finish(self, drivers: list[asyncio.Task]) -> None:
        """Waits for the drivers to stop issuing and every measured conversation to end, then cancels the
        warm-up/cool-down conversations still in flight (they are not measured)."""
        try:
            await asyncio.gather(*drivers)
            await asyncio.gather(*self.measure_tasks)
        finally:
            for task in drivers + list(self.other_tasks) + self.measure_tasks:
                task.cancel()


async def run_load(
    base_url: str,
    model: str,
    workload: Workload,
    shape: LoadShape,
    *,
    endpoint: Literal["completions", "chat"] = "completions",
    stream: bool = True,
    api_key: str | None = None,
    extra_body: dict | None = None,
    tokenizer: str | None = None,
    slos: Slos | None = None,
    progress: bool = False,
    keep_text: bool = False,
    percentiles: tuple[float, ...] = (50, 90, 95, 99),
    on_record: Callable[[RequestRecord], None] | None = None,
    control: ControlTimeouts | None = None,
    workers: int | None = None,
    pool: WorkerPool | None = None,
) -> LoadResult:
    """Runs `workload` against the OpenAI-compatible server at `base_url` in `shape`.

    tokenizer: a tokenizer.json path (or model directory), "server" (its /tokenize), "words", or None (the
    server's /tokenize when it has one, else words). extra_body: fields merged into every request body
    (sampling parameters, chat_template_kwargs, ...; they override servetune's own). control: the timeouts of
    the control-plane calls (`/tokenize`) made before the clock starts. workers: client processes that send the
    load (1: this process's event loop; None: the pool's default, else `default_workers`); this process then
    coordinates them. pool: where the workers start (`LocalPool` on this machine by default; `RayPool` on the
    nodes of a Ray cluster, where even one worker is a process of its own). Returns
    the records of every request (warm-up and cool-down included, marked by phase) and the summary of the
    measured ones, with the client's own evidence (CPU, event-loop lag, lost workers) in its validity.
    """
    if workers is not None and workers < 1:
        raise ServetuneError(f"workers must be at least 1, not {workers}", "use --workers 1 (in process) or more")
    n_workers = workers or (pool.default_count() if pool else None) or default_workers(shape)
    in_process = n_workers == 1 and pool is None
    base_url = normalize_base_url(base_url)  # what `launch` prints ends in /v1; the paths below add their own
    counter = await make_counter(tokenizer, base_url, model, control or shape.timeouts.control(), api_key)
    supply = Supply(RequestFactory(workload, counter, endpoint))
    local = counter if isinstance(counter, LocalTokenizer) else None
    connections = min(shape.concurrency or shape.max_concurrency or 64, 1024)
    try:
        await supply.prebuild(_expected_conversations(shape))
    finally:
        await counter.aclose()
    monitor = LoopMonitor()
    watch = asyncio.ensure_future(monitor.run())
    engine = EngineWatch(ControlClient(base_url, api_key=api_key, timeouts=control or shape.timeouts.control()))
    try:
        await engine.start()
        with young_collections_only():
            if in_process:
                client = Client(
                    Pool(base_url, shape.timeouts.connect_s),
                    model,
                    endpoint,
                    stream,
                    api_key,
                    extra_body,
                    workload.output_control,
                    local.count_one if local is not None else None,
                    keep_text,
                    Watchdog(shape.timeouts),
                )
                records, workers_seen, lost, t0, started_at = await _in_process(
                    client, supply, shape, on_record, progress, connections, base_url
                )
                clocks: list[str] = []
            else:
                setup = WorkerSetup(
                    base_url, model, endpoint, stream, api_key, extra_body, workload.output_control,
                    local.name if local is not None else None, keep_text, shape.timeouts, -(-connections // n_workers),
                )  # fmt: skip
                records, workers_seen, lost, t0, started_at, clocks = await _spread(
                    setup, n_workers, supply, shape, on_record, progress, pool or LocalPool()
                )
            wall_s = (_now() - t0) / 1e9
        engine_time = await engine.finish(records)
    finally:
        watch.cancel()
        await engine.close()
    own = ("client" if in_process else "coordinator", os.getpid(), monitor.samples())
    records.sort(key=lambda r: (r.sent_ns, r.index, r.turn))
    _mark_loop_lag(records, {0: own[2]} if in_process else {w: s for w, (_, _, s) in workers_seen.items()})
    settle(records)  # a start-up transient of the measured requests is warm-up too (metrics/steady.py says why)
    report = _client_report(shape, n_workers, records, [own, *workers_seen.values()], lost, clocks)
    return LoadResult(
        base_url=base_url,
        model=model,
        endpoint=endpoint,
        stream=stream,
        tokenizer=counter.name,
        shape=shape,
        workload=workload,
        started_at=started_at,
        wall_s=wall_s,
        records=records,
        summary=summarize(records, slos=slos, percentiles=percentiles, client=report),
        engine_time=engine_time,
    )


Samples = list[tuple[str, int, LoopSamples]]  # each client process's role, pid and loop samples
Workers = dict[int, tuple[str, int, LoopSamples]]  # ... of each worker process, by its index


async def _in_process(
    client: Client,
    supply: Supply,
    shape: LoadShape,
    on_record: Callable[[RequestRecord], None] | None,
    progress: bool,
    connections: int,
    base_url: str,
) -> tuple[list[RequestRecord], Workers, list[str], int, str]:
    """One worker: the requests run on this process's event loop (the path before worker processes existed)."""
    run = _Run(client, supply, shape, on_record)
    await _open_connections(client.pool, connections, base_url)
    started_at = dt.datetime.now(dt.UTC).isoformat()
    dog = asyncio.ensure_future(client.watchdog.run())
    display = _progress(run.records, shape) if progress else contextlib.nullcontext()
    run.start_ns = t0 = _now()
    try:
        with display:
            await (run.closed_loop() if shape.kind == "concurrency" else run.open_loop())
    finally:
        dog.cancel()
        client.pool.close()
    return run.records, {}, [], t0, started_at


async def _spread(
    setup: WorkerSetup,
    n: int,
    supply: Supply,
    shape: LoadShape,
    on_record: Callable[[RequestRecord], None] | None,
    progress: bool,
    pool: WorkerPool,
) -> tuple[list[RequestRecord], Workers, list[str], int, str, list[str]]:
    """N worker processes, started and set up (connections open) before the clock starts, then coordinated; each
    worker's samples by its index (a lost worker has none)."""
    with tempfile.TemporaryDirectory(prefix="servetune-workers-") as logs:
        links: list[WorkerLink] = []
        try:
            links.extend(await pool.start(n, Path(logs)))
            for i, link in enumerate(links):
                link.send("setup", dataclasses.replace(setup, index=i))
            await asyncio.gather(*(_ready(link) for link in links))
            coordinator = Coordinator(links, supply, shape, on_record)
            started_at = dt.datetime.now(dt.UTC).isoformat()
            display = _progress(coordinator.records, shape) if progress else contextlib.nullcontext()
            t0 = _now()
            with display:
                await coordinator.run()
        finally:
            await asyncio.gather(*(link.stop(grace_s=2.0) for link in links), return_exceptions=True)
    samples = {w: (links[w].name, links[w].pid, s) for w, s in sorted(coordinator.samples.items())}
    clocks = [link.clock for link in links if link.clock]
    return coordinator.records, samples, coordinator.lost, t0, started_at, clocks


async def _ready(link: WorkerLink) -> None:
    """Waits for a worker's answer to its setup: ready, or why it cannot work (as the user's error)."""
    try:
        message = await asyncio.wait_for(link.receive(), SETUP_S)
    except (WorkerGone, TimeoutError) as err:
        raise ServetuneError(
            f"client {link.cause()} before it was ready: {err}", "run with --workers 1 to see the error in process"
        ) from err
    if message[0] == "failed":
        raise ServetuneError(message[1], message[2] or "start the server, or check the URL and port")


def _mark_loop_lag(records: list[RequestRecord], by_worker: dict[int, LoopSamples]) -> None:
    """Sets each streamed record's loop lag (`loop_lag_first_ns`, `loop_lag_stream_ns`) from the samples of the
    process that read its chunks (`by_worker`: this one as worker 0, or each worker's, on the coordinator's clock):
    what the client's own lateness can have added to its TTFT and ITL, which `settle` must not blame on the
    server. A lost worker left no samples: its records keep 0, not measured, and are judged on their raw values."""
    for worker, loop in by_worker.items():
        mine = [r for r in records if r.worker == worker and r.chunk_ns]
        sent, first, last = (np.array([r.sent_ns for r in mine]), np.array([r.chunk_ns[0] for r in mine]),
                             np.array([r.chunk_ns[-1] for r in mine]))  # fmt: skip
        for r, lag, stream in zip(mine, lag_within(loop, sent, first), lag_within(loop, first, last), strict=True):
            r.loop_lag_first_ns, r.loop_lag_stream_ns = int(lag), int(stream)


def _client_report(
    shape: LoadShape, workers: int, records: list[RequestRecord], samples: Samples, lost: list[str], clocks: list[str]
) -> ClientReport:
    """Each client process's evidence over the measured phase (first measured send to last measured end)."""
    measured = [r for r in records if r.phase == "measure"]
    start = min((r.sent_ns for r in measured), default=0)
    end = max((r.done_ns for r in measured), default=0)
    procs = [p for role, pid, s in samples if (p := client_process(role, pid, s, start, end)) is not None]
    return ClientReport(
        kind=shape.kind,
        concurrency=shape.concurrency if shape.kind == "concurrency" else None,
        workers=workers,
        cores=usable_cores(),
        processes=procs,
        lost=lost,
        clocks=clocks,
    )


def default_workers(shape: LoadShape) -> int:
    """Worker processes when none are asked for: the CPUs this process may use, one left for the coordinator,
    but no more than one per `STREAMS_PER_WORKER` streams the shape can have in flight (a process per stream
    buys nothing, and each costs a start-up); 1 (in process) on one or two CPUs."""
    cores = usable_cores()
    if cores <= 2:
        return 1
    if shape.kind == "concurrency":
        streams = shape.concurrency or 1
    elif shape.max_concurrency:
        streams = shape.max_concurrency
    elif shape.rate == float("inf"):
        streams = shape.requests or STREAMS_PER_WORKER
    else:
        streams = int(shape.rate or 1)  # about a second per request: a rate of r keeps ~r streams in flight
    return max(1, min(cores - 1, streams // STREAMS_PER_WORKER))


def _expected_conversations(shape: LoadShape) -> int:
    """How many conversations to build before the clock starts (the rest are built on demand)."""
    want = shape.warmup_requests + (shape.requests or 0)
    if shape.duration_s is not None and shape.kind == "rate" and shape.rate != float("inf"):
        seconds = shape.warmup_s + shape.duration_s + shape.cooldown_s
        want = max(want, shape.warmup_requests + int(1.2 * (shape.rate or 0) * seconds) + 16)
    elif shape.duration_s is not None:
        want = max(want, 4 * (shape.concurrency or shape.max_concurrency or 64))
    return min(max(want, shape.concurrency or 0), 4096)


async def _open_connections(pool: Pool, n: int, base_url: str) -> None:
    """Opens the connections the run will need before the clock starts (no handshake inside a TTFT)."""
    try:
        conns = await asyncio.gather(*(pool.acquire() for _ in range(max(1, n))))
    except (TimeoutError, OSError) as err:
        raise ServetuneError(
            f"cannot connect to {base_url}: {err}", "start the server, or check the URL and port"
        ) from err
    for conn in conns:
        pool.release(conn)


def _progress(records: list[RequestRecord], shape: LoadShape) -> contextlib.AbstractContextManager[None]:
    from servetune.load.progress import live_progress

    return live_progress(records, shape)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine from synchronous code, on uvloop when it is installed (it costs the client less CPU).

    The result comes back as `run_coroutine` returns it (not formatted by asyncio: the repr of a run's thousands
    of records costs as much CPU as receiving them did). SIGTERM cancels the run like Ctrl-C does, through the
    loop (a handler that raises KeyboardInterrupt lands in whatever callback runs, and uvloop swallows it there:
    the run went on), then surfaces as KeyboardInterrupt."""
    terminated: list[bool] = []

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None

        def terminate() -> None:
            terminated.append(True)
            task.cancel()

        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # main thread, POSIX only
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
        return await coro

    previous = signal.getsignal(signal.SIGTERM)
    try:
        import uvloop
    except ImportError:
        factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    else:
        factory = uvloop.new_event_loop
    try:
        return run_coroutine(main(), loop_factory=factory)
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt from None
        raise
    finally:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)


def run_load_sync(*args: Any, **kwargs: Any) -> LoadResult:
    """`run_load` from synchronous code (see `run_sync`)."""
    return run_sync(run_load(*args, **kwargs))
