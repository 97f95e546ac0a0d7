"""What the executors that run several launch groups at once share (`local_gpus`: slots on this host's GPUs,
`ray_executor`: Ray tasks on the nodes of a cluster): the queue of groups in plan order, one feeder thread per
running slot draining its messages into one queue, this (the driver's) thread applying them to the store as
they arrive, and the rule for a slot that is lost — its variants not yet finished are recorded failed with the
cause, and the group is launched once more, elsewhere when there is an elsewhere; lost twice, it stays failed.

A group waits in the queue until its executor can claim what it needs (GPU ids here; Ray queues its own tasks),
first come first served: a smaller group never overtakes the head of the queue, so the estimate's order holds.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from servetune.errors import ServetuneError
from servetune.tune.execution.relay import Call, End, Logs, Lost, Message, Placed, apply
from servetune.tune.execution.session import LaunchSession, gpu_minutes, safe_name
from servetune.tune.results.result import Failure, LostAttempt
from servetune.tune.results.store import FINISHED, Store
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant

RETRIES = 1
"""A lost slot's group is launched once more (a node that died mid-run is a reason to go elsewhere, not to stop)."""


class Handle(Protocol):
    """A started slot: its messages (drained by a feeder thread; the last is `End` or `Lost`) and how to stop it."""

    def messages(self) -> Iterator[Message]: ...

    def stop(self) -> None: ...


@dataclass
class Job:
    """A submitted launch group: the variants it was submitted with (told to the source once it is over), those
    still to run, how many slots it lost, and where it ran then (not there again, when there is a choice)."""

    ticket: int
    group: list[Variant]
    todo: list[Variant]
    need: int
    lost: int = 0
    avoid: tuple[str, ...] = ()


@dataclass
class _Running:
    job: Job
    claim: tuple[str, ...]
    handle: Handle
    started: float = field(default_factory=time.monotonic)
    where: str = ""
    node: str | None = None
    ran_on: str | None = None
    activity: str = "launch"


class Fanout:
    """The base of the concurrent executors; a subclass says how many slots fit, claims one and opens it."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp
        self._queued: deque[Job] = deque()
        self._running: dict[int, _Running] = {}
        self._events: queue.Queue[tuple[int, Message]] = queue.Queue()
        self._tickets = itertools.count()
        self._threads: list[threading.Thread] = []
        self._last_need = 1
        self._bound: tuple[LaunchSession, Store] | None = None

    # -- what a subclass provides ----------------------------------------------------------------------------

    def capacity(self, need: int) -> int:
        """How many launch groups needing `need` devices each can run at once (0: none ever fits)."""
        raise NotImplementedError

    def describe(self, need: int) -> str:
        """What the executor has, for the error when a group can never fit."""
        raise NotImplementedError

    def claim(self, job: Job) -> tuple[str, ...] | None:
        """What `job` runs on, taken now; None while it must wait (called on the driver's thread)."""
        raise NotImplementedError

    def release(self, claim: tuple[str, ...]) -> None:
        """Gives back what `claim` took."""

    def open(self, job: Job, claim: tuple[str, ...], done: dict[str, set[tuple[str, int]]]) -> Handle:
        """Starts the slot of `job` (on the driver's thread: a process started here dies with it)."""
        raise NotImplementedError

    # -- the Executor interface --------------------------------------------------------------------------------

    def bind(self, session: LaunchSession, store: Store) -> None:
        self._bound = (session, store)

    def has_room(self) -> bool:
        return len(self._queued) + len(self._running) < self.capacity(self._last_need)

    def submit(self, group: Sequence[Variant]) -> None:
        need = self.exp.hardware.slot_size(group[0].config.flags)
        if self.capacity(need) < 1:
            raise ServetuneError(
                f"{group[0].name} needs {need} GPU(s) for one launch, but {self.describe(need)}",
                "lower its parallel sizes, or run where a launch of that size fits (more GPUs, another executor)",
            )
        self._last_need = need
        self._queued.append(Job(next(self._tickets), list(group), list(group), need))  # started by `wait`: a
        # batch's groups are all checked (a too-wide one is an error) before any of them launches

    def wait(self) -> list[Variant] | None:
        while self._queued or self._running:
            self._start_queued()
            ticket, message = self._events.get()
            finished = self._handle(ticket, message)
            if finished is not None:
                return finished
        return None

    def close(self) -> None:
        """Stops every slot still running (an interrupted run) and forgets the queue."""
        self._queued.clear()
        for run in list(self._running.values()):
            with contextlib.suppress(Exception):  # best effort while unwinding: the next slot must still be stopped
                run.handle.stop()
            self.release(run.claim)
        self._running.clear()
        for thread in self._threads:
            thread.join(timeout=5.0)

    # -- inside ----------------------------------------------------------------------------------------------

    @property
    def _session(self) -> LaunchSession:
        assert self._bound is not None, "bind() first"
        return self._bound[0]

    @property
    def _store(self) -> Store:
        assert self._bound is not None, "bind() first"
        return self._bound[1]

    def _start_queued(self) -> None:
        while self._queued:
            job = self._queued[0]
            claim = self.claim(job)
            if claim is None:
                return
            self._queued.popleft()
            done = {v.key(): self._store.finished_runs(v.key()) for v in job.todo}
            try:
                handle = self.open(job, claim, done)
            except BaseException:
                self.release(claim)
                raise
            self._running[job.ticket] = _Running(job, claim, handle)
            thread = threading.Thread(target=self._feed, args=(job.ticket, handle), daemon=True)
            thread.start()
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _feed(self, ticket: int, handle: Handle) -> None:
        """Runs in a thread per slot: its messages into the one queue the driver's thread reads."""
        try:
            for message in handle.messages():
                self._events.put((ticket, message))
                if isinstance(message, End | Lost):
                    return
            self._events.put((ticket, Lost("task_lost", "the slot's stream ended without its session's end")))
        except Exception as err:  # noqa: BLE001 - whatever ends a slot's stream early, the slot is lost
            self._events.put((ticket, Lost("task_lost", f"{type(err).__name__}: {err}")))

    def _handle(self, ticket: int, message: Message) -> list[Variant] | None:
        """Applies one message; returns the submitted group once it is over."""
        run = self._running.get(ticket)
        if run is None:
            return None  # a slot stopped by close(): nothing of it is recorded any more
        if isinstance(message, Call):
            apply(message, self._session)
            if message.method == "say" and len(message.args) == 2:
                run.activity = str(message.args[1])
            if message.kwargs.get("ran_on"):
                run.ran_on = str(message.kwargs["ran_on"])
        elif isinstance(message, Placed):
            run.where, run.node = message.where, message.node
        elif isinstance(message, Logs):
            self._write_logs(message)
        elif isinstance(message, End):
            self._finish(run)
            return run.job.group
        elif isinstance(message, Lost):
            self._finish(run)
            return self._lose(run, message)
        return None

    def _finish(self, run: _Running) -> None:
        del self._running[run.job.ticket]
        with contextlib.suppress(Exception):  # the slot has ended; stopping it only reaps it
            run.handle.stop()
        self.release(run.claim)

    def _lose(self, run: _Running, lost: Lost) -> list[Variant] | None:
        """Records the unfinished variants failed with the cause; queues the group again once (first in line)."""
        job, session, store = run.job, self._session, self._store
        ran_on = run.ran_on or run.where or "a slot that never started"
        unfinished = [v for v in job.todo if store.status(v.key()) not in FINISHED]
        retry = bool(unfinished) and job.lost < RETRIES
        then = (
            "it is launched once more, elsewhere when there is an elsewhere" if retry else "lost twice, it stays failed"
        )
        failure = Failure(
            klass=lost.klass,
            excerpt=lost.cause,
            hint=f"the launch's node or task was lost, not by the engine's doing: {then}",
            during=run.activity,
        )
        wall = time.monotonic() - run.started
        for variant in unfinished:
            store.add_lost(variant.key(), LostAttempt(ran_on=ran_on, failure=failure))
            minutes = gpu_minutes(self.exp, variant, wall)
            store.set_status(variant.key(), "failed", failure=failure, wall_s=wall, gpu_minutes=minutes)
        names = ", ".join(v.name for v in unfinished) or "nothing unfinished"
        session.emit(f"LOST {names} on {ran_on}: {lost.klass} during {run.activity}: {lost.cause}")
        if retry:
            job.lost += 1
            job.todo = unfinished
            job.avoid = (run.node,) if run.node else run.claim
            self._queued.appendleft(job)
            return None
        for variant in unfinished:
            session.skip_all(variant)
            session.progress.variant_done()
        return job.group

    def _write_logs(self, logs: Logs) -> None:
        """Engine logs from a node without the experiment folder, written where a local run writes them."""
        root = self._session.out_dir.resolve()
        for name, data in logs.files.items():
            path = (root / name).resolve()
            if root not in path.parents:
                continue  # only files inside the folder (a relative path, no `..`)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def log_path(out_dir: Path, job: Job) -> Path:
    """Where a slot process logs (its own tracebacks; the engine has its own log)."""
    return out_dir / "logs" / "slots" / f"{job.ticket:03d}-{safe_name(job.todo[0].name)}-{job.lost}.log"
