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
    zombie: bool


def _info(proc: psutil.Process) -> ProcInfo | None:
    """The process's ids, or None when it is gone (or not ours to inspect) by the time we ask."""
    try:
        pid = proc.pid
        return ProcInfo(pid=pid, pgid=os.getpgid(pid), sid=os.getsid(pid), zombie=proc.status() == psutil.STATUS_ZOMBIE)
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
