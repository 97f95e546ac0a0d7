"""Why a client's event loop ran late, and so what the user should do: its own load (less load, more workers),
another process on its CPU (quiet the machine, pin the client), or neither (a blocking call, a busy host).

The real cases run the client in this process against the in-process mock server and hold its loop up for real:
a busy loop in it, a blocking sleep in it, and a real-time process pinned to its CPU.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from servetune.load.monitor import client_process, lag_within
from servetune.load.runner import _mark_loop_lag, run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.record import RequestRecord
from servetune.metrics.validity import ClientProcess, ClientReport, Validity, check_validity
from servetune.mock.config import MockConfig
from servetune.mock.server import running

W = Workload.synthetic(16, 8)
MS = 1_000_000


def _samples(moments: list[tuple[int, int, int]]) -> tuple[bytes, bytes, bytes, bytes]:
    """Monitor samples of 10 ms intervals; each moment is (lag, ran, waited) in ms of one interval."""
    t, lag, cpu, wait = [0], [0], [0], [0]
    for late, ran, waited in moments:
        t.append(t[-1] + (10 + late) * MS)
        lag.append(late * MS)
        cpu.append(cpu[-1] + ran * MS)
        wait.append(wait[-1] + waited * MS)
    return tuple(np.array(x, dtype=np.int64).tobytes() for x in (t, lag, cpu, wait))  # type: ignore[return-value]


def test_the_late_moments_are_split_into_running_waiting_and_neither() -> None:
    """Only the intervals whose lag reached the p99 are looked at: the quiet ones do not dilute a single stall."""
    quiet = [(0, 1, 0)] * 98
    proc = client_process("worker 0", 1, _samples([*quiet, (30, 4, 32), (30, 2, 30)]), 0, 10**12)
    assert proc is not None and proc.loop_lag_p99_ms == pytest.approx(30)
    assert proc.late_waiting_pct == pytest.approx(100 * 62 / 80)
    assert proc.late_busy_pct == pytest.approx(100 * 6 / 80)
    unknown = _samples([*quiet, (30, 40, 0)])
    unknown = (*unknown[:3], np.full(100, -1, dtype=np.int64).tobytes())  # no schedstat (not Linux)
    proc = client_process("client", 1, unknown, 0, 10**12)
    assert proc is not None and proc.late_waiting_pct is None and proc.late_busy_pct == pytest.approx(100)


def test_own_work_stretched_by_other_processes_is_still_told_to_take_less_load() -> None:
    """Late moments of 70 ms in which the loop ran 34 ms and waited 33 ms for a CPU (its own 30 ms spins, under a
    CPU hog on both cores): neither share reaches half, and it was told it was held up outside its own work; but
    its own work alone overran the 10 ms timer period by 24 ms, past the lag bound, so less load is the cure."""
    quiet = [(0, 1, 0)] * 98
    proc = client_process("client", 1, _samples([*quiet, (60, 34, 33), (60, 34, 33)]), 0, 10**12)
    assert proc is not None and proc.late_own_ms == pytest.approx(24)
    assert proc.late_busy_pct == pytest.approx(100 * 34 / 70) and proc.late_waiting_pct == pytest.approx(100 * 33 / 70)
    v = check_validity([], ClientReport(kind="concurrency", concurrency=4, workers=1, cores=2, processes=[proc]))
    late = [w for w in v.warnings if "event loop ran late" in w]
    assert len(late) == 1 and "lower the load" in late[0] and "held up outside" not in late[0], v.warnings


def test_the_lag_within_a_span_is_the_held_time_inside_it() -> None:
    """A sample at t with lag L: the loop ran nothing from t - L to t. A span gets the part of each held interval
    that lies inside it: whole, cut at either end, or none."""
    t, lag, cpu, wait = (np.frombuffer(b, dtype=np.int64) for b in _samples([(0, 1, 0), (30, 1, 0), (0, 1, 0)]))
    samples = (t.tobytes(), lag.tobytes(), cpu.tobytes(), wait.tobytes())  # held from 20 to 50 ms
    starts = np.array([0, 30, 0, 55]) * MS
    ends = np.array([60, 40, 25, 80]) * MS
    assert list(lag_within(samples, starts, ends) / MS) == [30, 10, 5, 0]


def test_each_record_gets_the_lag_of_the_process_that_read_it() -> None:
    """Worker 1's loop was held from 20 to 50 ms, worker 0's never: a request worker 1 read over that time gets
    the hold, split at its first chunk; worker 0's the same span gets none; a lost worker (no samples) and an
    answer with no chunks keep 0, not measured."""
    held = _samples([(0, 1, 0), (30, 1, 0), (0, 1, 0)])
    quiet = _samples([(0, 1, 0)] * 5)

    def record(worker: int, chunks: list[int]) -> RequestRecord:
        return RequestRecord(index=worker, worker=worker, sent_ns=0, chunk_ns=[c * MS for c in chunks])

    records = [record(1, [30, 45, 60]), record(0, [30, 45, 60]), record(2, [30, 60]), record(1, [])]
    _mark_loop_lag(records, {0: quiet, 1: held})
    assert [(r.loop_lag_first_ns / MS, r.loop_lag_stream_ns / MS) for r in records] == [
        (10, 20),
        (0, 0),
        (0, 0),
        (0, 0),
    ]


def test_a_short_run_whose_worst_moment_opens_the_window_still_has_it_explained() -> None:
    """27 samples: the p99 lies between the two worst lags; the worst is the window's first sample, whose interval
    starts at the sample before the window (a short run in CI once left both shares empty)."""
    moments = [(0, 1, 0), (25, 20, 10), *[(2, 1, 0)] * 26]
    window_start = (10 + 0) * MS + 1  # after the first moment: the worst one opens the window
    proc = client_process("client", 1, _samples(moments), window_start, 10**12)
    assert proc is not None and proc.samples == 27 and proc.loop_lag_max_ms == pytest.approx(25)
    assert proc.late_busy_pct == pytest.approx(100 * 20 / 35)
    assert proc.late_waiting_pct == pytest.approx(100 * 10 / 35)


@pytest.mark.parametrize(
    ("busy", "waiting", "says"),
    [
        (90.0, 5.0, "lower the load, or use more client processes"),
        (10.0, 85.0, "other processes on this machine took its CPU"),
        (5.0, 3.0, "held up outside its own work"),
        (10.0, None, "lower the load, or use more client processes"),  # no schedstat: the old advice
    ],
)
def test_the_verdict_names_the_cause_and_its_cure(busy: float, waiting: float | None, says: str) -> None:
    proc = ClientProcess(
        role="worker 0",
        pid=1,
        cpu_pct=40,
        loop_lag_p50_ms=0.1,
        loop_lag_p99_ms=12,
        loop_lag_max_ms=30,
        late_busy_pct=busy,
        late_waiting_pct=waiting,
        samples=300,
    )
    v = check_validity([], ClientReport(kind="concurrency", concurrency=4, workers=2, cores=4, processes=[proc]))
    late = [w for w in v.warnings if "event loop ran late" in w]
    assert v.client_limited and len(late) == 1 and says in late[0], v.warnings


async def _held_up(hold: Callable[[], Coroutine[Any, Any, object]]) -> Validity:
    """A one-process closed loop of 1 s while `hold` runs beside it in its loop."""

    async with running(MockConfig(ttft_ms=5, itl_ms=2)) as url:
        task = asyncio.ensure_future(hold())
        try:
            result = await run_load(url, "mock", W, LoadShape.closed(4, duration_s=1.0), workers=1)
        finally:
            task.cancel()
    return result.summary.validity


def _late(v: Validity) -> tuple[ClientProcess, str]:
    assert v.client is not None and v.client_limited, v.warnings
    late = [w for w in v.warnings if "event loop ran late" in w]
    assert len(late) == 1, v.warnings
    return v.client.processes[0], late[0]


async def test_a_loop_busy_with_its_own_work_is_told_to_take_less_load() -> None:
    """Spins of 30 ms of CPU time every 5 ms: its own work alone overruns the 10 ms timer period by about 20 ms,
    however much of the CPU other processes take (under a CPU hog on both cores it ran 31-47% of its late moments
    and waited 48-69%: the shares tell the machine's load, the overrun the client's)."""

    async def spin() -> None:
        while True:
            end = time.thread_time() + 0.03
            while time.thread_time() < end:  # CPU time, so another process on the core does not shorten it
                pass
            await asyncio.sleep(0.005)

    proc, warning = _late(await _held_up(spin))
    assert proc.late_own_ms is not None and proc.late_own_ms > 10, proc
    assert "lower the load" in warning


async def test_a_blocked_loop_is_flagged_and_told_that_less_load_will_not_help() -> None:
    """Closed loop in one process has no schedule to be late against; the event-loop lag is what shows it (this
    was tests/load/test_workers.py's closed-loop check, with its assertions; the cause is new). Its own work is
    not blamed, so it is not told to lower the load: on a quiet machine it was held up outside its own work; under
    a CPU hog, after each 30 ms block it then waited for a CPU longer still, and it is told other processes took
    it. Either way less load would not help; which of the two it hears depends on the machine."""

    async def block() -> None:
        while True:
            time.sleep(0.03)  # the client's loop is held up elsewhere, as at c1024 on one core
            await asyncio.sleep(0.005)

    v = await _held_up(block)
    assert v.client_limited and not v.ok
    assert any("the client limited this run" in w and "event loop ran late" in w for w in v.warnings), v.warnings
    assert v.client is not None and v.client.processes[0].loop_lag_p99_ms > 20
    proc, warning = _late(v)
    assert proc.late_busy_pct is not None and proc.late_busy_pct < 50 and proc.late_own_ms is not None, proc
    assert proc.late_own_ms < 5 and "lower the load" not in warning, warning
    assert "held up outside its own work" in warning or "other processes on this machine took its CPU" in warning


@contextmanager
def _realtime_hog_on(cpu: int) -> Iterator[None]:
    """A SCHED_FIFO process on `cpu` that takes it 25 ms of every 50 (ends by itself after 10 s as well)."""
    code = (
        "import os, time\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\n"
        "print('ready', flush=True)\n"
        "end = time.monotonic() + 10\n"
        "while time.monotonic() < end:\n"
        "    t = time.monotonic() + 0.025\n"
        "    while time.monotonic() < t:\n"
        "        pass\n"
        "    time.sleep(0.025)\n"
    )
    hog = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert hog.stdout is not None
        if hog.stdout.readline().strip() != "ready":
            hog.wait(5)
            assert hog.stderr is not None
            err = hog.stderr.read()
            if "PermissionError" in err:
                pytest.skip("a real-time process needs CAP_SYS_NICE (root) on this machine")
            raise AssertionError(err)
        yield
    finally:
        hog.send_signal(signal.SIGKILL)
        hog.wait(5)


async def test_a_loop_another_process_took_the_cpu_from_is_told_so() -> None:
    """The loop's thread and a real-time hog share one CPU: in its late moments it waited, runnable, for it."""
    mine = os.sched_getaffinity(0)
    cpu = max(mine)
    os.sched_setaffinity(0, {cpu})  # this thread only (Linux): the event loop's
    try:
        with _realtime_hog_on(cpu):
            proc, warning = _late(await _held_up(asyncio.Event().wait))
    finally:
        os.sched_setaffinity(0, mine)
    assert proc.late_waiting_pct is not None and proc.late_waiting_pct >= 50, proc
    assert "other processes on this machine took its CPU" in warning
