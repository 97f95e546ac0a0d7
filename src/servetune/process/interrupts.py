"""Running a coroutine from synchronous code so that a Ctrl-C (or SIGTERM) stops it at a clean point.

`asyncio.run` builds its event loop before it installs its own SIGINT handler (which cancels the main task); a
signal that arrives in between raises KeyboardInterrupt wherever the interpreter is, once in CI inside the event
loop's constructor: the half-built loop's `__del__` then printed "Exception ignored … Traceback" after `tune`'s
clean "interrupted" message, and the coroutine that never started warned "never awaited". `run_coroutine`
builds the loop with both signals held (a signal that came meanwhile is delivered the moment they are released,
outside the loop's construction) and closes a coroutine that the interrupt kept from starting.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
_HELD = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait (blocked, not lost) while the body runs; main thread only, elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def run_coroutine(
    coro: Coroutine[Any, Any, T], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
) -> T:
    """`asyncio.run(coro)` (on `loop_factory`'s loop, e.g. uvloop's), with the loop built while the signals are
    held; an interrupt before the coroutine started closes it instead of leaving it to warn.

    The result comes back through a box, not as the main task's result: asyncio formats a finished task's result
    with `repr`, and the repr of a simulated run's thousand records took most of a second."""
    box: list[T] = []

    async def boxed() -> None:
        box.append(await coro)

    try:
        with signals_held():
            runner = asyncio.Runner(loop_factory=loop_factory)
            runner.get_loop()
        with runner:
            runner.run(boxed())
        return box[0]
    finally:
        coro.close()  # a finished coroutine ignores it; one never started is closed quietly
