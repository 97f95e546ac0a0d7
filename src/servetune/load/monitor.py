"""How busy a client process was: its event-loop lag, CPU time and CPU wait, sampled every few milliseconds.

A client that cannot keep up does not fail; it measures itself. Every time stamp it takes is late by as long as
its event loop was held up, so TTFT grows and the gaps between tokens collapse to 0 (tokens read in one go). The
lag of a timer that should fire every `interval_s` is exactly that delay. Why it was held up decides what the
user should do, so two more series are kept beside it: the process's CPU time (it was busy with its own
load: lower the load or add workers) and, on Linux, the time it waited runnable for a CPU (`schedstat`: other
processes on the machine ran instead, and lowering the load would not help). What is left of a late moment is
time it was blocked (a blocking call) or that the hypervisor took from the whole VM. All are kept raw with their
time, so the run's summary can judge the measured phase alone (warm-up and cool-down left out) in every process,
the coordinator's and each worker's alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from array import array
from collections.abc import Iterator

import numpy as np

from servetune.metrics.validity import ClientProcess

_now = time.monotonic_ns
_SCHEDSTAT = "/proc/thread-self/schedstat"  # run time, run-queue wait (ns), time slices: Linux only

LoopSamples = tuple[bytes, bytes, bytes, bytes]  # times, lags, CPU times, CPU waits (-1: not known here)


class LoopMonitor:
    """Samples (time, lag, the process's CPU time, the loop thread's CPU wait) of this event loop until cancelled."""

    def __init__(self, interval_s: float = 0.01) -> None:
        self.interval_ns = int(interval_s * 1e9)
        self.t = array("q")
        self.lag = array("q")
        self.cpu = array("q")
        self.wait = array("q")

    async def run(self) -> None:
        interval, interval_s = self.interval_ns, self.interval_ns / 1e9
        cpu = time.process_time_ns
        try:
            fd = os.open(_SCHEDSTAT, os.O_RDONLY)
        except OSError:  # not Linux, or a kernel without schedstat
            fd = -1
        try:
            while True:
                before = _now()
                await asyncio.sleep(interval_s)
                after = _now()
                self.t.append(after)
                self.lag.append(max(0, after - before - interval))
                self.cpu.append(cpu())
                self.wait.append(int(os.pread(fd, 64, 0).split()[1]) if fd >= 0 else -1)
        finally:
            if fd >= 0:
                os.close(fd)

    def samples(self) -> LoopSamples:
        """The raw samples as bytes (cheap to send from a worker process)."""
        return self.t.tobytes(), self.lag.tobytes(), self.cpu.tobytes(), self.wait.tobytes()


def shift_samples(samples: LoopSamples, offset_ns: int) -> LoopSamples:
    """A worker's samples with their times moved onto the coordinator's clock (a worker on another machine)."""
    t = np.frombuffer(samples[0], dtype=np.int64) + offset_ns
    return t.tobytes(), samples[1], samples[2], samples[3]


def lag_within(samples: LoopSamples, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """For each span [start, end], how long the event loop was held up inside it (ns): an upper bound on what the
    client's own lateness can have added to a time taken at its end.

    A sample at t with lag L says the loop ran no timer between t - L (when its timer was due) and t, so a chunk
    that arrived then was read up to L late, and a server in this process (the mock) answered late too. These
    held intervals never overlap (each starts after the sample before it), so the held time up to any instant is
    their running sum plus the part of the one it falls in; a span's is the difference at its two ends, for every
    span at once. All of a span's held time counts, not only the hold that ended it: a server in the same
    process was held by each of them, and one elsewhere was not (only the last delayed the read), so for it the
    bound is loose, which errs toward calling a difference the client's."""
    t = np.frombuffer(samples[0], dtype=np.int64)
    lag = np.frombuffer(samples[1], dtype=np.int64)
    if not len(t):
        return np.zeros(len(start_ns), dtype=np.int64)
    due = t - lag
    before = np.concatenate(([0], np.cumsum(lag)))  # held time of the samples before each one

    def held_until(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(t, x, "right")  # the samples that ended by x; x falls in sample k's interval, if any
        inside = np.clip(x - due[np.minimum(k, len(t) - 1)], 0, None) * (k < len(t))
        return before[k] + inside

    return held_until(np.asarray(end_ns, dtype=np.int64)) - held_until(np.asarray(start_ns, dtype=np.int64))


def client_process(role: str, pid: int, samples: LoopSamples, start_ns: int, end_ns: int) -> ClientProcess | None:
    """One process's evidence over the window [start_ns, end_ns] (the measured phase); None without samples.

    Its late moments are the sampling intervals whose lag reached the p99 (those that set the figure the verdict
    judges; in a short run the p99 lies between the two worst, so at least the worst counts); what the thread did
    in them — ran, waited for a CPU, neither — is summed over them, so a single stall in a short run is explained
    as well as a long saturation, and so is the CPU time it ran beyond the timer's period in each (what its own
    work alone would have made it late by). An interval is known from the sample before it, inside the window or
    not."""
    t, lag, cpu, wait = (np.frombuffer(b, dtype=np.int64) for b in samples)
    inside = (t >= start_ns) & (t <= end_ns)
    if inside.sum() < 2:
        return None
    tw, lw, cw = t[inside], lag[inside] / 1e6, cpu[inside]
    wall = tw[-1] - tw[0]
    p50, p99 = (float(x) for x in np.percentile(lw, [50, 99]))
    ends = np.flatnonzero(inside)
    ends = ends[ends > 0]  # at least one of two or more samples
    late = ends[lag[ends] / 1e6 >= min(p99, float(lag[ends].max()) / 1e6)]
    spans = t[late] - t[late - 1]
    span = float(spans.sum())
    known = span > 0 and bool((wait >= 0).all())
    ran = cpu[late] - cpu[late - 1]  # CPU time it ran in each late interval ...
    own = np.clip(ran - (spans - lag[late]), 0, None)  # ... and beyond the timer's period (the span less its lag)
    return ClientProcess(
        role=role,
        pid=pid,
        cpu_pct=100.0 * float(cw[-1] - cw[0]) / wall if wall > 0 else 0.0,
        loop_lag_p50_ms=p50,
        loop_lag_p99_ms=p99,
        loop_lag_max_ms=float(lw.max()),
        late_busy_pct=100.0 * float(ran.sum()) / span if span > 0 else None,
        late_waiting_pct=100.0 * float((wait[late] - wait[late - 1]).sum()) / span if known else None,
        late_own_ms=float(own.mean()) / 1e6,
        samples=int(inside.sum()),
    )


@contextlib.contextmanager
def young_collections_only() -> Iterator[None]:
    """While a run lasts, the garbage collector looks at young objects only.

    A run keeps every record it made until its end, so the heap grows by thousands of objects a second; CPython
    then walks all of them in a full collection every so often, a pause of tens of milliseconds at c1024 in which
    no time stamp is taken (the event-loop lag showed it). Everything built before the clock starts is frozen,
    and objects that survive a young collection are left alone until the run ends; a cycle that becomes garbage
    meanwhile waits until then."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(before[0], 10_000), 2**31 - 1, 2**31 - 1)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask, as `taskset` sets it), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity masks
        return os.cpu_count() or 1
