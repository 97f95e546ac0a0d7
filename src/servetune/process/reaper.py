"""Stops every live process group when servetune exits, is Ctrl-C'd, or is told to terminate.

`atexit` covers normal exits and uncaught exceptions (KeyboardInterrupt included); SIGTERM/SIGHUP handlers
cover `kill` and a closed terminal; PR_SET_PDEATHSIG (set in the child, see group.py) covers SIGKILL of
servetune itself, which no handler can catch.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Protocol


class Stoppable(Protocol):
    def stop(self, grace_s: float = ...) -> object: ...


EXIT_GRACE_S = 5.0
_live: dict[int, Stoppable] = {}
_lock = threading.Lock()
_installed = False
_previous: dict[int, Callable | int | None] = {}


def register(pgid: int, group: Stoppable) -> None:
    """Remembers a started group so that it is stopped when servetune goes away."""
    with _lock:
        _live[pgid] = group
    _install()


def forget(pgid: int) -> None:
    """Called once a group has been stopped."""
    with _lock:
        _live.pop(pgid, None)


def stop_all(grace_s: float = EXIT_GRACE_S) -> None:
    """Stops every registered group (errors are swallowed: this runs while exiting)."""
    with _lock:
        groups = list(_live.values())
    for group in groups:
        with contextlib.suppress(Exception):  # best effort at exit: the next group must still be stopped
            group.stop(grace_s=grace_s)


def _on_signal(signum: int, frame: object) -> None:
    stop_all()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> None:
    global _installed  # noqa: PLW0603 - one reaper per process, installed once
    if _installed:
        return
    _installed = True
    atexit.register(stop_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit and PDEATHSIG still hold
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)
        if previous in (signal.SIG_IGN,):
            continue
        _previous[signum] = previous if callable(previous) else None
        signal.signal(signum, _on_signal)
