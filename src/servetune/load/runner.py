"""`run_load`: drives a workload against a server in a load shape and returns the records and their summary.

Only asyncio, aiohttp (for /tokenize), pydantic and numpy are needed on this path; rich is imported only for
the live progress display, `tokenizers` only for a local tokenizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from servetune.control.client import ControlTimeouts, normalize_base_url
from servetune.errors import ServetuneError
from servetune.load.client import Client, Watchdog
from servetune.load.http1 import Pool
from servetune.load.prompts import Conversation, RequestFactory
from servetune.load.shape import LoadShape, Phaser
from servetune.load.tokens import LocalTokenizer, make_counter
from servetune.load.workload import Workload
from servetune.metrics.record import Phase, RequestRecord
from servetune.metrics.slo import Slos
from servetune.metrics.summary import Summary, summarize

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

    def to_json(self, *, records: bool = False, indent: int | None = 2) -> str:
        """The run as JSON; per-request records only when asked (they can be large: use write_jsonl)."""
        return self.model_dump_json(indent=indent, exclude=None if records else {"records"})


class _Run:
    def __init__(
        self,
        client: Client,
        factory: RequestFactory,
        shape: LoadShape,
        on_record: Callable[[RequestRecord], None] | None,
    ) -> None:
        self.client = client
        self.factory = factory
        self.shape = shape
        self.phaser = Phaser(shape)
        self.records: list[RequestRecord] = []
        self.on_record = on_record
        self.start_ns = 0
        self.measure_tasks: list[asyncio.Task] = []
        self.other_tasks: set[asyncio.Task] = set()
        self._convs: dict[int, Conversation] = {}
        self.next_index = 0

    async def conversation(self, index: int) -> Conversation:
        conv = self._convs.pop(index, None)
        return conv if conv is not None else await self.factory.conversation(index)

    async def prebuild(self, n: int) -> None:
        """Builds the first conversations before the clock starts, so prompt building is not in the timeline."""
        for i in range(n):
            self._convs[i] = await self.factory.conversation(i)

    async def run_conversation(self, conv: Conversation, phase: Phase, scheduled_ns: int, dispatched_ns: int) -> None:
        for k, turn in enumerate(conv.turns):
            rec = RequestRecord.model_construct(
                **{
                    **_DEFAULTS,
                    "index": conv.index,
                    "traffic_class": conv.cls,
                    "phase": phase,
                    "conversation": conv.index,
                    "turn": k,
                    "scheduled_ns": scheduled_ns,
                    "dispatched_ns": dispatched_ns,
                    "chunk_ns": [],
                }
            )
            rec = await self.client.send(turn, rec)
            self.records.append(rec)
            if self.on_record is not None:
                self.on_record(rec)
            if not rec.ok:
                break
            scheduled_ns = dispatched_ns = _now()  # the next turn follows the answer at once

    def _spawn(self, coro, phase: Phase) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        if phase == "measure":
            self.measure_tasks.append(task)
        else:
            self.other_tasks.add(task)
            task.add_done_callback(self.other_tasks.discard)
        return task

    async def closed_loop(self) -> None:
        async def worker() -> None:
            while True:
                phase = self.phaser.next((_now() - self.start_ns) / 1e9)
                if phase is None:
                    return
                index = self.next_index
                self.next_index += 1
                conv = await self.conversation(index)
                now = _now()
                await self._spawn(self.run_conversation(conv, phase, now, now), phase)

        workers = [asyncio.ensure_future(worker()) for _ in range(self.shape.concurrency or 1)]
        await self._finish(workers)

    async def open_loop(self) -> None:
        shape = self.shape
        cap = asyncio.Semaphore(shape.max_concurrency) if shape.max_concurrency else None
        offsets = shape.arrivals(4096)

        async def capped(conv: Conversation, phase: Phase, scheduled: int, dispatched: int) -> None:
            assert cap is not None
            async with cap:
                await self.run_conversation(conv, phase, scheduled, dispatched)

        async def dispatcher() -> None:
            nonlocal offsets
            index = 0
            while True:
                if index >= len(offsets):
                    offsets = shape.arrivals(len(offsets) * 4)
                t = float(offsets[index])
                phase = self.phaser.next(t)
                if phase is None:
                    return
                scheduled = self.start_ns + int(t * 1e9)
                delay = (scheduled - _now()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                dispatched = _now()
                conv = await self.conversation(index)
                index += 1
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


_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in RequestRecord.model_fields.items()
    if not field.is_required()
}


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
) -> LoadResult:
    """Runs `workload` against the OpenAI-compatible server at `base_url` in `shape`.

    tokenizer: a tokenizer.json path (or model directory), "server" (its /tokenize), "words", or None (the
    server's /tokenize when it has one, else words). extra_body: fields merged into every request body
    (sampling parameters, chat_template_kwargs, ...; they override servetune's own). control: the timeouts of
    the control-plane calls (`/tokenize`) made before the clock starts. Returns the records of
    every request (warm-up and cool-down included, marked by phase) and the summary of the measured ones.
    """
    base_url = normalize_base_url(base_url)  # what `launch` prints ends in /v1; the paths below add their own
    counter = await make_counter(tokenizer, base_url, model, control)
    factory = RequestFactory(workload, counter, endpoint)
    pool = Pool(base_url, shape.timeouts.connect_s)
    watchdog = Watchdog(shape.timeouts)
    count_output = counter.count_one if isinstance(counter, LocalTokenizer) else None
    client = Client(
        pool, model, endpoint, stream, api_key, extra_body, workload.output_control, count_output, keep_text, watchdog
    )
    run = _Run(client, factory, shape, on_record)
    await run.prebuild(_expected_conversations(shape))
    await counter.aclose()
    await _open_connections(pool, min(shape.concurrency or shape.max_concurrency or 64, 1024), base_url)
    started_at = dt.datetime.now(dt.UTC).isoformat()
    dog = asyncio.ensure_future(watchdog.run())
    display = _progress(run, shape) if progress else contextlib.nullcontext()
    run.start_ns = t0 = _now()
    try:
        with display:
            await (run.closed_loop() if shape.kind == "concurrency" else run.open_loop())
    finally:
        dog.cancel()
        pool.close()
        await counter.aclose()
    records = sorted(run.records, key=lambda r: (r.sent_ns, r.index, r.turn))
    return LoadResult(
        base_url=base_url,
        model=model,
        endpoint=endpoint,
        stream=stream,
        tokenizer=counter.name,
        shape=shape,
        workload=workload,
        started_at=started_at,
        wall_s=(_now() - t0) / 1e9,
        records=records,
        summary=summarize(records, slos=slos, percentiles=percentiles),
    )


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


def _progress(run: _Run, shape: LoadShape):
    from servetune.load.progress import live_progress

    return live_progress(run.records, shape)


def run_load_sync(*args, **kwargs) -> LoadResult:
    """`run_load` from synchronous code, on uvloop when it is installed (it costs the client less CPU)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(run_load(*args, **kwargs))
    return uvloop.run(run_load(*args, **kwargs))
