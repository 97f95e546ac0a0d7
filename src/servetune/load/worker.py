"""A load worker process: its own event loop and connections, sending what the coordinator hands it.

`python -m servetune.load.worker FD` (started by `transport.LocalWorker`): FD is its end of the link. The
coordinator decides everything about the load (which conversation, when, in which phase); a worker only waits
for a conversation's scheduled time, sends its turns through the same `Client` as the in-process path (so the
records have exactly the same definitions), and streams the records back, batched once per loop iteration.

Messages in: ("setup", WorkerSetup), ("go", [(Conversation, phase, scheduled_ns, dispatched_ns), ...]), ("stop",).
Messages out: ("ready", pid) or ("failed", problem, fix), ("records", [RequestRecord], [finished conversation
indices]), ("beat",) every `BEAT_S` (the coordinator declares a silent worker lost), ("bye", monitor samples).
A go item's `dispatched_ns` is 0 when the worker waits for `scheduled_ns` and stamps the dispatch itself (open
loop); otherwise it starts at once (closed loop, or a capped open loop whose slot the coordinator granted).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Literal

from servetune.errors import ServetuneError
from servetune.load.client import Client, Watchdog
from servetune.load.http1 import Pool
from servetune.load.monitor import LoopMonitor, young_collections_only
from servetune.load.prompts import Conversation
from servetune.load.shape import Timeouts
from servetune.load.transport import frame, read_frame, serve_frames
from servetune.metrics.record import Phase, RequestRecord
from servetune.process.interrupts import run_coroutine

BEAT_S = 1.0
_now = time.monotonic_ns


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs to send requests like the in-process client does."""

    base_url: str
    model: str
    endpoint: Literal["completions", "chat"]
    stream: bool
    api_key: str | None
    extra_body: dict | None
    output_control: str
    tokenizer_file: str | None  # a local tokenizer counts output text here too (usage fallback, cross-check)
    keep_text: bool
    timeouts: Timeouts
    connections: int  # opened before the clock starts
    index: int = 0  # this worker's number, stamped on its records


GoItem = tuple[Conversation, Phase, int, int]


class _Worker:
    def __init__(self, setup: WorkerSetup, writer: asyncio.StreamWriter) -> None:
        count_output = None
        if setup.tokenizer_file is not None:
            from servetune.load.tokens import LocalTokenizer

            count_output = LocalTokenizer(setup.tokenizer_file).count_one
        self.setup = setup
        self.pool = Pool(setup.base_url, setup.timeouts.connect_s)
        self.watchdog = Watchdog(setup.timeouts)
        self.client = Client(
            self.pool,
            setup.model,
            setup.endpoint,
            setup.stream,
            setup.api_key,
            setup.extra_body,
            setup.output_control,
            count_output,
            setup.keep_text,
            self.watchdog,
        )
        self.writer = writer
        self.tasks: set[asyncio.Task] = set()
        self.out: list[RequestRecord] = []
        self.finished: list[int] = []
        self.flush_pending = False

    async def open(self) -> None:
        conns = await asyncio.gather(*(self.pool.acquire() for _ in range(max(1, self.setup.connections))))
        for conn in conns:
            self.pool.release(conn)

    def go(self, items: list[GoItem]) -> None:
        for item in items:
            task = asyncio.ensure_future(self._conversation(*item))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _conversation(self, conv: Conversation, phase: Phase, scheduled_ns: int, dispatched_ns: int) -> None:
        if not dispatched_ns:
            delay = (scheduled_ns - _now()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            dispatched_ns = _now()
        try:
            await self.client.run_conversation(conv, phase, scheduled_ns, dispatched_ns, self._emit)
        except Exception:  # noqa: BLE001 - a bug, not a server fault: die, so the coordinator reports it
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(70)
        self.finished.append(conv.index)
        self._flush_soon()

    def _emit(self, rec: RequestRecord) -> None:
        rec.worker = self.setup.index
        self.out.append(rec)
        self._flush_soon()

    def _flush_soon(self) -> None:
        if not self.flush_pending:
            self.flush_pending = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Sends the records and finished conversations of this loop iteration in one message."""
        self.flush_pending = False
        if self.out or self.finished:
            self.writer.write(frame("records", self.out, self.finished))
            self.out, self.finished = [], []

    async def stop(self) -> None:
        """Cancels what is still in flight (warm-up and cool-down conversations: never measured)."""
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.flush()
        self.pool.close()


async def _beat(writer: asyncio.StreamWriter) -> None:
    while True:
        await asyncio.sleep(BEAT_S)
        writer.write(frame("beat"))


async def serve(fd: int) -> None:
    """Runs one worker over the link on `fd` until told to stop or the coordinator goes away."""
    reader, writer = await serve_frames(socket.socket(fileno=fd))
    monitor = LoopMonitor()
    background = [asyncio.ensure_future(monitor.run()), asyncio.ensure_future(_beat(writer))]
    try:
        with young_collections_only():
            await _serve(reader, writer, monitor)
    finally:
        for task in background:
            task.cancel()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await writer.drain()
        writer.close()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, monitor: LoopMonitor) -> None:
    """The message loop: set up, then hand out conversations until told to stop."""
    worker: _Worker | None = None
    while True:
        try:
            message = await read_frame(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the coordinator is gone: nothing to report to
        kind = message[0]
        if kind == "setup":
            try:
                worker = _Worker(message[1], writer)
                await worker.open()
            except ServetuneError as err:
                writer.write(frame("failed", err.problem, err.fix))
                return
            except (TimeoutError, OSError) as err:
                writer.write(frame("failed", f"cannot connect to {message[1].base_url}: {err}", None))
                return
            writer.write(frame("ready", os.getpid()))
        elif kind == "go" and worker is not None:
            worker.go(message[1])
        elif kind == "stop":
            if worker is not None:
                await worker.stop()
            writer.write(frame("bye", monitor.samples()))
            return


def main() -> None:
    fd = int(sys.argv[1])
    try:
        import uvloop
    except ImportError:
        run_coroutine(serve(fd))
        return
    run_coroutine(serve(fd), uvloop.new_event_loop)


if __name__ == "__main__":
    main()
