"""Which processes belong to a process group or session, through psutil (Linux and macOS alike).

Membership is decided by ids only (process group and session), never by a process's name or command line, so a
user's own engines and a second servetune run are never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class ProcInfo:
    """One process: its ids and state."""

    pid: int
    pgid: int
    sid: int
    state: str
    """psutil's status name: running, sleeping, stopped (SIGSTOP), zombie, ..."""

    @property
    def zombie(self) -> bool:
        return self.state in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def _info(proc: psutil.Process) -> ProcInfo | None:
    """The process's ids, or None when it is gone (or not ours to inspect) by the time we ask."""
    try:
        pid = proc.pid
        return ProcInfo(pid=pid, pgid=os.getpgid(pid), sid=os.getsid(pid), state=proc.status())
    except (ProcessLookupError, PermissionError, psutil.Error):
        return None


def group_members(pgid: int, *, include_session: bool = True) -> list[ProcInfo]:
    """Processes whose process group is `pgid` (or, by default, whose session is it: an engine started with
    its own session may put helpers in new groups of that session, and those must die too)."""
    found = []
    for proc in psutil.process_iter():
        info = _info(proc)
        if info is not None and (info.pgid == pgid or (include_session and info.sid == pgid)):
            found.append(info)
    return found


def living(members: list[ProcInfo]) -> list[ProcInfo]:
    """Members that still run (zombies are dead and only wait to be reaped); never this process itself."""
    return [m for m in members if not m.zombie and m.pid != os.getpid()]


def group_pss_bytes(pgid: int) -> int:
    """The memory a process group (and its session) holds: the sum of its members' PSS, each shared page split
    among the processes that map it, so the engine's processes sharing torch's libraries are not counted twice.
    A member that exits or cannot be read while this runs counts 0."""
    total = 0
    for member in living(group_members(pgid)):
        try:
            total += int(getattr(psutil.Process(member.pid).memory_full_info(), "pss", 0))
        except (psutil.Error, OSError):
            continue
    return total
