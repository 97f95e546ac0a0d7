"""Which processes belong to a process group, read from /proc (no psutil needed, no names matched)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcInfo:
    """One process as /proc shows it."""

    pid: int
    pgid: int
    sid: int
    state: str
    comm: str

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def _read(pid_dir: Path) -> ProcInfo | None:
    try:
        raw = (pid_dir / "stat").read_text()
    except OSError:
        return None
    # comm is in parentheses and may hold spaces; the fields after the last ')' are fixed.
    head, _, tail = raw.rpartition(")")
    fields = tail.split()
    comm = head.partition("(")[2]
    return ProcInfo(pid=int(pid_dir.name), state=fields[0], pgid=int(fields[2]), sid=int(fields[3]), comm=comm)


def group_members(pgid: int, *, include_session: bool = True) -> list[ProcInfo]:
    """Processes whose process group is `pgid` (or, by default, whose session is it: an engine started with
    its own session may put helpers in new groups of that session, and those must die too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        info = _read(entry)
        if info is None:
            continue
        if info.pgid == pgid or (include_session and info.sid == pgid):
            found.append(info)
    return found


def living(members: list[ProcInfo]) -> list[ProcInfo]:
    """Members that still run (zombies are dead and only wait to be reaped)."""
    return [m for m in members if not m.zombie and m.pid != os.getpid()]
