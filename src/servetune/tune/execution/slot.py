"""A slot process: one launch group's session as a process of its own, on a GPU set of this host (`local-gpus`)
or on a Ray node (started there by the Ray task), relaying everything to the driver (`tune.relay`).

`python -m servetune.tune.execution.slot FD` reads one `SlotJob` from the connection on FD (an inherited socket),
runs the session against a `Relay`, sends `End` and exits. Why a process rather than a thread of the driver:
CUDA_VISIBLE_DEVICES is per process (the engine inherits the slot's environment); the store keeps one writer;
and an engine started from a process's main thread dies with that process (PR_SET_PDEATHSIG, which a thread's
children lose when the thread ends), so a slot that dies — its Ray node lost, its driver killed — takes its
engine with it, and its own reaper stops the engine when it is told to stop.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from servetune.process.group import ProcessGroup
from servetune.tune.execution.relay import End, Lost, Message, Placed, Relay
from servetune.tune.execution.session import LaunchSession, default_launcher
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant


@dataclass(frozen=True)
class SlotJob:
    """What a slot needs: the experiment, its launch group, the probe runs already stored for each variant
    (a retry or a resume repeats none), the folder its engine logs go to, and where it runs (the Ray node's id
    when on one: a lost launch is retried on another node)."""

    exp: Experiment
    group: tuple[Variant, ...]
    done: dict[str, set[tuple[str, int]]]
    out_dir: Path
    where: str
    node: str | None = None


class Slot:
    """A running slot process, seen from the process that started it (the driver, or a Ray task on its node)."""

    def __init__(self, group: ProcessGroup, conn: Connection) -> None:
        self.group = group
        self.conn = conn

    @classmethod
    def start(cls, job: SlotJob, log_path: Path, env: Mapping[str, str] | None = None) -> Slot:
        """Starts the slot process (its own process group; `env` added to this process's) and hands it `job`."""
        ours, theirs = socket.socketpair()
        try:
            group = ProcessGroup.start(
                [sys.executable, "-m", "servetune.tune.execution.slot", str(theirs.fileno())],
                log_path=log_path,
                env=env,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        conn.send(job)
        return cls(group, conn)

    def messages(self) -> Iterator[Message]:
        """Every message the slot sends, the last one `End`, or `Lost` when the process ended before its session."""
        while True:
            try:
                message: Message = self.conn.recv()
            except (EOFError, OSError):
                yield Lost("task_lost", self.cause())
                return
            yield message
            if isinstance(message, End):
                return

    def cause(self) -> str:
        """How the slot process ended (exit code or signal, and its log's last line)."""
        for _ in range(40):  # its end closed: give the process a moment to exit, so the cause has its code
            if self.group.poll() is not None:
                break
            time.sleep(0.05)
        return self.group.describe_end("the slot process")

    def stop(self, grace_s: float = 15.0) -> None:
        """Closes the link and stops the process (its reaper stops the engine it runs first)."""
        self.conn.close()
        self.group.stop(grace_s=grace_s)


def _where(job: SlotJob) -> str:
    """Where this slot runs, with the GPUs its engine will see (the environment it inherits from the slot)."""
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    return job.where if devices is None else f"{job.where}, CUDA_VISIBLE_DEVICES={devices}"


def main() -> None:
    conn = Connection(int(sys.argv[1]))
    job: SlotJob = conn.recv()
    where = _where(job)
    conn.send(Placed(where, job.node))
    relay = Relay(job.done, conn.send)
    launcher = default_launcher(lambda line: relay.emit(f"  engine: {line}"))
    LaunchSession(job.exp, job.out_dir, relay, relay, launcher, relay.emit, where).run(list(job.group))
    conn.send(End())
    conn.close()


if __name__ == "__main__":
    main()
