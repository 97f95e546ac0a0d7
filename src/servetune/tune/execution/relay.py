"""A launch group's session run away from the store — in a slot process on a GPU set of this host, or on a Ray
node — and the messages it sends back to the one process that writes the store (SQLite has one writer, and a
remote node may not even see the experiment folder).

The session there records into a `Relay`: reads (which probe runs are stored already) are answered from the
snapshot sent with the job, every write and progress call becomes a `Call` message; the driver `apply`s each
one to its store and progress the moment it arrives, so a finished probe run is stored as it finishes, wherever
it ran. A slot's stream of messages starts with `Placed` (where it runs) and ends with `End` (the session
returned) or `Lost` (the slot, its task or its node died first: nothing more will come).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from servetune.tune.execution.session import LaunchSession
from servetune.tune.results.result import RunResult, VariantStatus

RECORDER_CALLS = frozenset({"set_status", "add_run"})
TRACKER_CALLS = frozenset({"say", "launched", "ran", "skip", "variant_done"})


@dataclass(frozen=True)
class Call:
    """A call the remote session made on its recorder, its tracker or its emit, to be made on the driver's."""

    target: Literal["store", "progress", "emit"]
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Placed:
    """The slot started: where it runs (recorded with its launches), and the Ray node id when on one."""

    where: str
    node: str | None = None


@dataclass(frozen=True)
class Logs:
    """Engine logs written on a node the experiment folder is not on: relative path → bytes (the tail of big files)."""

    files: dict[str, bytes]


@dataclass(frozen=True)
class End:
    """The session returned: every variant of the group is done or failed."""


@dataclass(frozen=True)
class Lost:
    """The slot ended before its session did (`node_lost`: the Ray node died; `task_lost`: the slot's process or
    Ray task died): what it had not finished is recorded failed with `cause`."""

    klass: Literal["node_lost", "task_lost"]
    cause: str


Message = Call | Placed | Logs | End | Lost


class Relay:
    """The driver's store and progress as seen from a slot (satisfies `session.Recorder` and `session.Tracker`)."""

    def __init__(self, done: dict[str, set[tuple[str, int]]], send: Callable[[Message], None]) -> None:
        self._done = {key: set(runs) for key, runs in done.items()}
        self._send = send

    # Recorder
    def finished_runs(self, key: str) -> set[tuple[str, int]]:
        return set(self._done.get(key, ()))

    def set_status(self, key: str, status: VariantStatus, **fields: Any) -> None:
        self._send(Call("store", "set_status", (key, status), fields))

    def add_run(self, run: RunResult) -> None:
        self._done.setdefault(run.variant_key, set()).add((run.probe, run.repeat))
        self._send(Call("store", "add_run", (run,)))

    # Tracker
    def say(self, variant: str, what: str) -> None:
        self._send(Call("progress", "say", (variant, what)))

    def launched(self, seconds: float) -> None:
        self._send(Call("progress", "launched", (seconds,)))

    def ran(self, probe: str, seconds: float) -> None:
        self._send(Call("progress", "ran", (probe, seconds)))

    def skip(self, probe: str, repeats: int = 1) -> None:
        self._send(Call("progress", "skip", (probe, repeats)))

    def variant_done(self) -> None:
        self._send(Call("progress", "variant_done"))

    def emit(self, line: str) -> None:
        self._send(Call("emit", "", (line,)))


def apply(call: Call, session: LaunchSession) -> None:
    """Makes a relayed call on the driver's own store, progress or emit (only the calls a session makes)."""
    if call.target == "emit":
        session.emit(*call.args)
    elif call.target == "store" and call.method in RECORDER_CALLS:
        getattr(session.store, call.method)(*call.args, **call.kwargs)
    elif call.target == "progress" and call.method in TRACKER_CALLS:
        getattr(session.progress, call.method)(*call.args, **call.kwargs)
    else:
        raise ValueError(f"not a session call: {call.target}.{call.method}")
