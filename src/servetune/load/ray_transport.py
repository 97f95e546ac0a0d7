"""Load workers on the nodes of a Ray cluster (`bench --ray ADDRESS`), and servetune's one way into a cluster.

Each worker is the same `python -m servetune.load.worker` process as on this machine, started on its node by a
small Ray actor (`_Host`, from the actor's main thread: the worker dies with it, and reads end-of-file when it
goes) and linked to the coordinator through that actor: `RayWorker` implements `transport.WorkerLink`, so the
coordinator, its one arrival schedule and its one concurrency budget do not change. Frames (the transport's
own format) travel as bytes, one actor call in flight per direction, so they stay in order.

Clocks. Every time a worker takes is its own machine's monotonic clock; TTFT, ITL and E2EL are differences
within one record, so they are what the worker measured, never a subtraction across machines. To merge the
records on one time line (and send each arrival at its time), each worker's offset from the coordinator's
clock is measured before the run, NTP-style: the round trip with the least delay bounds the error by half of
it. A worker on the coordinator's own machine and boot (one CLOCK_MONOTONIC) gets offset 0, exactly; the
measurement is stated beside it as a check. Every offset is stated in the run's client report.

Ray is imported here and in `tune.ray_executor` only: importing servetune never imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from servetune.errors import ServetuneError
from servetune.load.monitor import shift_samples
from servetune.load.transport import WorkerGone, WorkerLink, frame, read_frame, start_worker_process
from servetune.metrics.record import RequestRecord

CLOCK_PINGS = 16
START_S = 120.0  # an actor has this long to be placed and start its worker (a busy cluster queues it)
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_now = time.monotonic_ns


class RayUnreachable(ServetuneError):
    """No Ray cluster answers at the address (nothing listens there, or it never finished the handshake): the
    environment failed, like a server that is gone (exit 1)."""

    exit_code = 1


def connect(address: str | None) -> bool:
    """Joins the Ray cluster at `address` (None: RAY_ADDRESS, else the one this machine runs) as a driver; True
    when this call connected (its caller then disconnects), False when this process already was connected.

    Bounded: `ray.init` retries an address where nothing answers for a minute or more (a loopback address it
    first turns into this machine's own), deaf to SIGTERM meanwhile. So the address Ray will dial is tried
    with a plain TCP connection first (`CONNECT_CHECK_S`), and `ray.init` then runs in a thread of its own that
    this one waits for up to `INIT_S`, answering SIGTERM and Ctrl-C (as KeyboardInterrupt) while it waits."""
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    _check_reachable(target)
    done: list[BaseException | None] = []

    def init() -> None:
        quiet = _NotFromMainThread()  # Ray warns that it set no SIGTERM handler here: servetune keeps its own
        logging.getLogger("ray._private.worker").addFilter(quiet)
        try:
            ray.init(address=target, log_to_driver=False, logging_level=logging.WARNING)
            done.append(None)
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread, which raises it
            done.append(err)
        finally:
            logging.getLogger("ray._private.worker").removeFilter(quiet)

    thread = threading.Thread(target=init, name="servetune ray.init", daemon=True)
    with _signals_as_interrupt():
        thread.start()
        thread.join(INIT_S)
    if not done:
        raise RayUnreachable(
            f"the Ray cluster at {target} did not let this driver join within {INIT_S:g} s",
            "check that ADDRESS is the head's GCS address (`ray status --address ADDRESS`), or start one "
            "(`ray start --head`)",
        )
    err = done[0]
    if isinstance(err, ConnectionError | ValueError | RuntimeError):
        raise RayUnreachable(
            f"cannot join the Ray cluster at {target}: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            "start one (`ray start --head`), or give its address (--ray-address HOST:PORT, or RAY_ADDRESS)",
        ) from None
    if err is not None:
        raise err
    return True


CONNECT_CHECK_S = 5.0
"""How long a TCP connection to the cluster's address may take before it counts as not answering."""
INIT_S = 60.0
"""How long `ray.init` may take once the address answers (a handful of seconds on a live cluster)."""


def _check_reachable(target: str) -> None:
    """A `HOST:PORT` address that Ray would dial (a loopback host becomes this machine's address, as Ray turns
    it) must accept a TCP connection; "auto", "local" and the like are left to Ray, which answers them fast."""
    from ray._private.services import canonicalize_bootstrap_address

    bare = target.removeprefix("ray://")
    host, sep, port = bare.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    dialed = bare
    if not target.startswith("ray://"):
        with contextlib.suppress(Exception):  # Ray's own rewrite; on any doubt the address as given
            dialed = canonicalize_bootstrap_address(bare) or bare
    d_host, _, d_port = dialed.rpartition(":")
    try:
        with socket.create_connection((d_host.strip("[]"), int(d_port)), timeout=CONNECT_CHECK_S):
            return
    except OSError as err:
        why = err.strerror or type(err).__name__
    turned = f" (Ray dials {dialed} for it: it turns a loopback address into this machine's)" if dialed != bare else ""
    raise RayUnreachable(
        f"no Ray cluster answers at {target}{turned}: {why}",
        "give the head's GCS address (`ray start --head` prints it; a head started with --node-ip-address "
        "listens on that address only), or start one",
    )


class _NotFromMainThread(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "not the main thread" not in record.getMessage()


@contextlib.contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """While the body waits, SIGTERM and SIGINT raise KeyboardInterrupt here (as servetune's own handler does),
    whatever handler was in place: an event loop's handler would only run once the loop runs again, and the
    loop is blocked by this wait. Main thread only; the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class Node:
    """An alive node of the cluster."""

    id: str
    address: str
    resources: dict[str, float]

    @property
    def name(self) -> str:
        return f"{self.address} ({self.id[:8]})"


def alive_nodes() -> list[Node]:
    """The cluster's nodes that Ray counts alive (a node that just died may still be among them for seconds)."""
    return [
        Node(n["NodeID"], n["NodeManagerAddress"], dict(n.get("Resources") or {}))
        for n in ray.nodes()
        if n.get("Alive")
    ]


def node_name(node_id: str) -> str:
    """`ADDRESS (id)` of a node, as reports show it."""
    found = next((n for n in alive_nodes() if n.id == node_id), None)
    return found.name if found else node_id[:8]


def boot_id() -> str:
    """This machine's boot: two processes with the same one share CLOCK_MONOTONIC ('' where it cannot be read)."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


def first_line(err: BaseException) -> str:
    """The first line of a Ray error (its message; the rest is Ray's traceback)."""
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


@ray.remote(concurrency_groups={"send": 1, "receive": 1}, max_restarts=0)  # type: ignore[call-overload]  # Ray's stubs lack concurrency_groups
class _Host:
    """On its node: starts one load worker process and carries its frames (a thread per direction)."""

    def __init__(self, index: int) -> None:
        self.logs = Path(tempfile.mkdtemp(prefix="servetune-load-"))
        self.name = f"worker {index}"
        self.group, self.sock = start_worker_process(index, self.logs)

    def where(self) -> tuple[str, int, str]:
        """(node id, worker pid, boot id)."""
        return ray.get_runtime_context().get_node_id(), self.group.pid, boot_id()

    def clock(self) -> int:
        return _now()

    @ray.method(concurrency_group="send")
    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the worker is gone: `receive` reports it
            self.sock.sendall(data)

    @ray.method(concurrency_group="receive")
    def receive(self) -> tuple[bytes, str]:
        """The next bytes the worker sent (blocks until some come); at its end (b"", why it ended)."""
        try:
            chunk = self.sock.recv(1 << 20)
        except OSError:
            chunk = b""
        if chunk:
            return chunk, ""
        for _ in range(20):  # its end closed: give the process a moment to exit, so the cause has its code
            if self.group.poll() is not None:
                break
            time.sleep(0.05)
        return b"", self.group.describe_end(self.name)

    def stop(self, grace_s: float) -> str | None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        report = self.group.stop(grace_s)
        shutil.rmtree(self.logs, ignore_errors=True)
        if report.survivors:
            return f"{self.name}: pids {report.survivors} survived SIGKILL"
        return "killed" if report.sent_sigkill else None


class RayWorker:
    """A load worker on a Ray node, as a `WorkerLink`: frames out and in through its host actor, every time
    stamp moved between the worker's clock and the coordinator's by the measured offset."""

    def __init__(self, index: int, actor: Any, node: str, pid: int, offset_ns: int, clock: str) -> None:
        self.name = f"worker {index} on {node}"
        self.node = node
        self.pid = pid
        self.clock: str | None = clock
        self._actor = actor
        self._offset = offset_ns  # worker clock - coordinator clock
        self._reader = asyncio.StreamReader(limit=2**24)
        self._outbox: list[bytes] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._gone = ""
        self._pumps = [asyncio.ensure_future(self._pump_in()), asyncio.ensure_future(self._pump_out())]

    async def _pump_in(self) -> None:
        try:
            while True:
                chunk, why = await self._actor.receive.remote()
                if not chunk:
                    self._gone = f"{why} (on {self.node})"
                    break
                self._reader.feed_data(chunk)
        except RayError as err:
            self._gone = f"{self.name}: its Ray actor was lost: {first_line(err)}"
        self._reader.feed_eof()

    async def _pump_out(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._outbox:
                data = b"".join(self._outbox)
                self._outbox.clear()
                try:
                    await self._actor.send.remote(data)
                except RayError as err:
                    self._gone = self._gone or f"{self.name}: its Ray actor was lost: {first_line(err)}"
                    self._outbox.clear()
            self._idle.set()

    def send(self, *message: Any) -> None:
        if message[0] == "go":
            message = ("go", [(c, p, s + self._offset, d + self._offset if d else 0) for c, p, s, d in message[1]])
        self._outbox.append(frame(*message))
        self._idle.clear()
        self._wake.set()

    async def drain(self) -> None:
        await self._idle.wait()

    async def receive(self) -> tuple:
        try:
            message = await read_frame(self._reader)
        except asyncio.IncompleteReadError as err:
            raise WorkerGone(self.cause()) from err
        if self._offset and message[0] == "records":
            records: list[RequestRecord] = message[1]
            for rec in records:
                rec.shift_clock(-self._offset)
        elif self._offset and message[0] == "bye":
            message = ("bye", shift_samples(message[1], -self._offset))
        return message

    async def stop(self, grace_s: float) -> str | None:
        for pump in self._pumps:
            pump.cancel()
        try:
            report: str | None = await asyncio.wait_for(self._actor.stop.remote(grace_s), grace_s + 10)
        except (RayError, TimeoutError) as err:
            report = f"{self.name}: its actor could not stop it ({first_line(err)})"
        with contextlib.suppress(RayError):
            ray.kill(self._actor)
        return report

    def cause(self) -> str:
        return self._gone or f"{self.name} stopped answering"


async def measure_offset(actor: Any) -> tuple[int, int]:
    """(offset of the actor's clock from this one, its bound) in ns, from the least delayed of `CLOCK_PINGS`."""
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_PINGS):
        t0 = _now()
        theirs: int = await actor.clock.remote()
        t1 = _now()
        sample = (theirs - (t0 + t1) // 2, (t1 - t0) // 2)
        if best is None or sample[1] < best[1]:
            best = sample
    assert best is not None
    return best


class RayPool:
    """Load workers as Ray actors on the cluster's nodes — all alive ones, or those `nodes` names (an address
    or a node id prefix each) — placed round robin, one per node by default."""

    def __init__(self, address: str | None, nodes: tuple[str, ...] | None = None) -> None:
        self.address = address
        self.wanted = nodes

    def _nodes(self) -> list[Node]:
        connect(self.address)
        alive = alive_nodes()
        if not self.wanted:
            return alive
        chosen = [n for n in alive if any(n.address == w or n.id.startswith(w) for w in self.wanted)]
        missing = [w for w in self.wanted if not any(n.address == w or n.id.startswith(w) for n in alive)]
        if missing or not chosen:
            raise ServetuneError(
                f"--ray-nodes: no alive node of the cluster is {', '.join(missing) or 'named'}",
                "name nodes by address or node id: " + ", ".join(n.name for n in alive),
            )
        return chosen

    def default_count(self) -> int | None:
        return len(self._nodes())

    async def start(self, count: int, log_dir: Path) -> list[WorkerLink]:
        nodes = self._nodes()
        actors = [
            _Host.options(  # type: ignore[attr-defined]
                scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[i % len(nodes)].id, soft=False)
            ).remote(i)
            for i in range(count)
        ]
        try:
            placed = await asyncio.wait_for(asyncio.gather(*(a.where.remote() for a in actors)), START_S)
        except (RayError, TimeoutError) as err:
            for actor in actors:
                with contextlib.suppress(RayError):
                    ray.kill(actor)
            raise ServetuneError(
                f"the load workers did not start on the Ray cluster within {START_S:g} s: {first_line(err)}",
                "check `ray status` (each worker takes 1 CPU on its node), or use fewer --workers",
            ) from None
        here = boot_id()
        links: list[WorkerLink] = []
        for i, (actor, (node_id, pid, boot)) in enumerate(zip(actors, placed, strict=True)):
            measured, bound = await measure_offset(actor)
            same = bool(here) and boot == here
            offset = 0 if same else measured
            node = next((n.name for n in nodes if n.id == node_id), node_id[:8])
            said = f"measured {measured / 1e6:+.3f} ms ± {bound / 1e6:.3f} ms over {CLOCK_PINGS} round trips"
            clock = (
                f"worker {i} on {node}: offset 0 (the coordinator's machine and boot: one monotonic clock; {said})"
                if same
                else f"worker {i} on {node}: offset {offset / 1e6:+.3f} ms ± {bound / 1e6:.3f} ms (least delayed of "
                f"{CLOCK_PINGS} round trips); TTFT/ITL are taken on the worker's own clock"
            )
            links.append(RayWorker(i, actor, node, pid, offset, clock))
        return links
