"""How the coordinator of a run talks to its worker processes, behind one small protocol.

The coordinator only ever holds `WorkerLink`s: `send` a message, `receive` the next one, `stop` the worker, and
say why it ended. `LocalWorker` is a process on this machine: started as its own process group through
`servetune.process.group` (PR_SET_PDEATHSIG, the exit reaper, stopped by its own group id: no worker outlives
servetune, whatever the exit path), talking over a socketpair that it inherits (no port, no file; a worker whose
coordinator vanished reads end-of-file and exits). `ray_transport.RayWorker` (a worker process started by a Ray
actor on a node of a cluster: `bench --ray`) is another implementation of the same protocol; the coordinator
does not change. A `WorkerPool` starts a run's links (`LocalPool` here, `ray_transport.RayPool` on a cluster).

Why not `multiprocessing`: its workers are not process groups of their own (a stray grandchild survives), a
worker killed by a signal can leave a `Queue` feeder thread blocked, and its fork start method copies the
coordinator's event loop and sockets; a plain `python -m servetune.load.worker` with one inherited socket has
none of that and is what a remote actor looks like too.

Messages are tuples of plain data, `pickle`d (both ends are servetune of one installation) and length-prefixed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import pickle
import socket
import struct
import sys
from pathlib import Path
from typing import Any, Protocol

from servetune.errors import ServetuneError
from servetune.process.group import ProcessGroup

_HEADER = struct.Struct(">I")


class WorkerGone(Exception):
    """The worker ended (exited, was killed, or closed its end) before it said goodbye."""


class WorkerLink(Protocol):
    """One worker, wherever it runs."""

    name: str
    pid: int
    clock: str | None
    """How its clock relates to the coordinator's, for the report (None: this machine's, the same clock)."""

    def send(self, *message: Any) -> None:
        """Queues a message (never blocks; `drain` waits for the transport when it is full)."""

    async def drain(self) -> None: ...

    async def receive(self) -> tuple:
        """The next message; raises `WorkerGone` once the worker has ended."""

    async def stop(self, grace_s: float) -> str | None:
        """Ends the worker (it should have exited by itself); returns what stopping it took, when it was forced."""

    def cause(self) -> str:
        """Why the worker ended, for a report (exit code or signal, and the last line of its log)."""


class WorkerPool(Protocol):
    """Where a run's worker processes start: `LocalPool` here, `ray_transport.RayPool` on a Ray cluster's nodes."""

    def default_count(self) -> int | None:
        """How many workers when none are asked for (None: `runner.default_workers`, by this machine's CPUs)."""

    async def start(self, count: int, log_dir: Path) -> list[WorkerLink]:
        """Starts `count` workers (not set up yet); worker logs go to `log_dir` when they run here."""


class LocalWorker:
    """A worker process on this machine, connected by an inherited socketpair."""

    clock: str | None = None

    def __init__(self, name: str, group: ProcessGroup, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.name = name
        self.group = group
        self.pid = group.pid
        self._reader = reader
        self._writer = writer

    @classmethod
    async def start(cls, index: int, log_dir: Path) -> LocalWorker:
        """Starts worker `index` (`python -m servetune.load.worker FD`), logging to `log_dir/worker-<index>.log`."""
        group, ours = start_worker_process(index, log_dir)
        reader, writer = await asyncio.open_connection(sock=ours, limit=2**24)
        return cls(f"worker {index}", group, reader, writer)

    def send(self, *message: Any) -> None:
        if not self._writer.is_closing():
            self._writer.write(frame(*message))

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):  # the worker is gone: its reader reports it
            await self._writer.drain()

    async def receive(self) -> tuple:
        try:
            return await read_frame(self._reader)
        except (asyncio.IncompleteReadError, ConnectionError) as err:
            for _ in range(20):  # its end closed: give the process a moment to exit, so the cause has its code
                if self.group.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            raise WorkerGone(self.cause()) from err

    async def stop(self, grace_s: float) -> str | None:
        self._writer.close()
        report = await asyncio.to_thread(self.group.stop, grace_s)
        if report.survivors:
            return f"{self.name}: pids {report.survivors} survived SIGKILL"
        return "killed" if report.sent_sigkill else None

    def cause(self) -> str:
        return self.group.describe_end(self.name)


def require_ray(what: str) -> None:
    """Ray is the `ray` extra: a command that needs it and does not find it says how to get it."""
    if importlib.util.find_spec("ray") is None:
        raise ServetuneError(f"{what} needs Ray, which is not installed", "pip install 'servetune[ray]'")


def start_worker_process(index: int, log_dir: Path) -> tuple[ProcessGroup, socket.socket]:
    """Starts `python -m servetune.load.worker FD` as its own process group, logging to `log_dir/worker-<index>.log`;
    returns it with this end of its link (a worker whose other end closes reads end-of-file and exits)."""
    ours, theirs = socket.socketpair()
    try:
        group = ProcessGroup.start(
            [sys.executable, "-m", "servetune.load.worker", str(theirs.fileno())],
            log_path=log_dir / f"worker-{index}.log",
            pass_fds=(theirs.fileno(),),
        )
    finally:
        theirs.close()
    return group, ours


class LocalPool:
    """Worker processes on this machine (`run_load`'s default)."""

    def default_count(self) -> int | None:
        return None

    async def start(self, count: int, log_dir: Path) -> list[WorkerLink]:
        return list(await asyncio.gather(*(LocalWorker.start(i, log_dir) for i in range(count))))


async def serve_frames(sock: socket.socket) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The worker's end of its link (the inherited socket) as asyncio streams."""
    return await asyncio.open_connection(sock=sock, limit=2**24)


def frame(*message: Any) -> bytes:
    """One message as the bytes that go on the link."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> tuple:
    """The next message on a link (raises `asyncio.IncompleteReadError` at its end)."""
    head = await reader.readexactly(_HEADER.size)
    return pickle.loads(await reader.readexactly(_HEADER.unpack(head)[0]))
