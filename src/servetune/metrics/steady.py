"""Steady state: where a run's start-up transient ends, and whether its measured window still trends.

A fixed warm-up (a count of requests or seconds) is a guess: an engine still compiling, filling caches or growing
its batch answers its first measured requests slower than the rest, and those requests set the percentiles. The
anchor is AIPerf's steady-state detection (`aiperf/analysis/ramp_detection.py`, `stationarity.py`), over the
measured requests in send order, TTFT and each request's mean ITL taken as two series:

- **MSER-5** finds the transient: the series in batch means of 5, the truncation d minimizing the variance of the
  batch means kept over their number (the marginal standard error of their mean), d at most half the batches; the
  requests before it are the transient. As AIPerf does, fewer than 20 values are not judged. servetune then moves
  the cut back over batches just before it that already look steady (MSER over-cuts a noisy steady part: a step
  at 15 of 60 noisy values can be cut at 30), so the transient reported is the transient there was, and past the
  requests sent at the same instant as its last one (a closed loop's first wave, on the simulator's clock).
  A burst — every measured request scheduled at one instant — is not judged: its order is a queue's, and TTFT
  grows along it by design.
- **the batch-means trend test** judges the window after the cut: the Spearman correlation of 10 batch means with
  their order; |rho| > 0.65 (p < 0.05 at 10 batches) is a trend, the window never became steady.

servetune adds a materiality test to both, because a statistic alone flags a 1 % drift on a server as steady as the
mock: a transient counts when its mean differs from the rest's by `MATERIAL` (20 %, and at least `MATERIAL_MS`) and
by 3 standard errors of the rest's batch means; a trend when the last third of the window differs from the first by
`MATERIAL` (and `MATERIAL_MS`) too. Only the server's part of a difference is judged: the client's own event loop
runs late on a loaded client machine, most at the start (tens of ms on a 20 ms mock), and every time stamp it
takes then is late, so its first requests look slower than the server served them. Each record carries how long
its process's loop was held up while it waited (`loop_lag_first_ns` for its TTFT, `loop_lag_stream_ns` for its
stream, from `load/monitor.py`'s samples); the head's extra lateness over the rest's, when it points the same
way as the head's difference, is taken off that difference before the materiality tests (`_unexplained`). A
difference the client's lateness explains is a tie, not the server's warm-up. Records without those figures
(another tool's) are judged on their raw difference. Requests
a server stall touched (`stalls.py`) are left out of both series and a transient never reaches past the first of
them: a stall is reported as one, never hidden in a longer warm-up.

What servetune's own runs do with it (`settle`): the transient's requests become warm-up after the fact — their
phase is `warmup` and `transient` marks them — so every figure, file and chart counts them as the warm-up they
were, and the run says how many and why. Detected after the run, not by extending the warm-up live, because
deciding live needs a judge on a few finished warm-up requests of a closed loop (one wave of c in flight) that
MSER cannot give before 20 of them, which would lengthen every warm-up, steady or not; and because it is the
same rule for every driver of a load (one process, worker processes, Ray, the simulator) and for records read
back. The cost: a count-bounded run measures fewer requests than asked when it had a transient, and says so. A
window that never became steady is left as it was, and its verdict says so: a run with a material trend is not a
steady-state measurement, however it is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from servetune.metrics.record import RequestRecord
from servetune.metrics.stalls import find_stalls, touched

BATCH = 5  # MSER-5: batch means of 5 values
MIN_VALUES = 20  # fewer values in a series than this: not judged (AIPerf's floor)
TREND_BATCHES = 10  # the trend test's batch means
TREND_RHO = 0.65  # |Spearman rho| of the batch means with their order above this: a trend (p < 0.05 at 10)
MATERIAL = 0.20  # a transient or trend must move the metric's mean by this share of it ...
MATERIAL_MS = 2.0
"""... and by this many ms: below it a change is the client's own timing (its event loop runs a few ms late on a
loaded machine, a new connection costs about a ms), not the server's: a mock at 2 ms TTFT whose first requests took
3.1 ms had 65 of 450 requests moved to warm-up. On a GPU engine 20% of a TTFT or an ITL is above it anyway."""
SIGNIFICANCE = 3.0  # ... and a transient by this many standard errors of the steady batch means

Metric = Literal["ttft", "itl"]


class SteadyState(BaseModel):
    """The steady-state verdict of a run's measured window."""

    model_config = ConfigDict(frozen=True)

    judged: bool  # enough measured requests, sent over time, to judge
    unjudged: str | None = None  # why not
    steady: bool  # no material transient left in the window, and no trend
    transient: int = 0  # leading measured requests that were a transient
    moved: bool = False  # ... and were counted as warm-up (servetune's own runs); False: only reported
    ended_at_s: float | None = None  # where the transient ended: the send of the first steady request, s into the run
    metric: Metric | None = None  # the series whose transient it was
    before_ms: float | None = None  # that metric's mean over the transient ...
    after_ms: float | None = None  # ... and after it
    trend: str | None = None  # the trend left in the window: it never became steady

    def describe(self) -> str:
        """One line for the summary: steady or not, and where the transient ended."""
        if not self.judged:
            return f"steady state: not judged ({self.unjudged})"
        if self.trend is not None:
            return f"steady state: NOT steady, never became steady: {self.trend}"
        if not self.transient:
            return "steady state: steady; no start-up transient (MSER-5)"
        what = f"the first {self.transient} measured requests were a start-up transient ({self._change()}, MSER-5)"
        where = f"; it ended {self.ended_at_s:.2f} s into the run" if self.ended_at_s is not None else ""
        if self.moved:
            return f"steady state: steady; {what}: counted as warm-up{where}"
        return f"steady state: NOT steady; {what}{where}"

    def _change(self) -> str:
        if self.metric is None or self.before_ms is None or self.after_ms is None:
            return "no latency measured on one side of it"
        return f"{self.metric.upper()} {self.before_ms:.1f} → {self.after_ms:.1f} ms"

    def warning(self) -> str | None:
        """The validity warning of a window that is not steady (None when it is, or was not judged)."""
        if not self.judged or self.steady:
            return None
        if self.trend is not None:
            return (
                f"the measured window never became steady: {self.trend} — the figures describe a server still "
                "changing; run longer, or with a longer warm-up (--warmup-requests, --warmup-s)"
            )
        return (
            f"the measured window was not steady: its first {self.transient} requests were a start-up transient "
            f"({self._change()}, MSER-5) — lengthen the warm-up past {self.ended_at_s:.2f} s into the run"
        )


def mser5(values: np.ndarray) -> int:
    """MSER-5's truncation point as AIPerf computes it: an index into `values` (a multiple of 5), 0 when nothing
    should be cut or there are too few values (under 10, or under 4 full batches)."""
    if len(values) < 2 * BATCH:
        return 0
    full = len(values) // BATCH * BATCH
    means = np.asarray(values[:full], dtype=float).reshape(-1, BATCH).mean(axis=1)
    m = len(means)
    if m < 4:
        return 0
    kept = np.arange(m, 0, -1, dtype=float)  # batches kept when cutting d: m - d
    total = np.cumsum(means[::-1])[::-1]
    squares = np.cumsum((means**2)[::-1])[::-1]
    variance = np.maximum(squares / kept - (total / kept) ** 2, 0.0)
    return int(np.argmin((variance / kept)[: m // 2 + 1])) * BATCH


def trend(values: np.ndarray, late: np.ndarray | None = None) -> float | None:
    """The relative change of a series that trends (the batch-means test and the materiality test both say so),
    last third against first third; None when it does not, or is too short to tell. `late`: each value's client
    lateness (ms); the part of the change the last third's extra lateness explains is not material."""
    if len(values) < max(MIN_VALUES, TREND_BATCHES):
        return None
    size = len(values) // TREND_BATCHES
    means = np.asarray(values[: size * TREND_BATCHES], dtype=float).reshape(TREND_BATCHES, size).mean(axis=1)
    if abs(_spearman(means)) <= TREND_RHO:
        return None
    third = len(values) // 3
    first, last = float(np.mean(values[:third])), float(np.mean(values[-third:]))
    extra = 0.0 if late is None else float(np.mean(late[-third:]) - np.mean(late[:third]))
    server = _unexplained(last - first, extra)
    change = (last - first) / first if first > 0 else 0.0
    return change if first > 0 and server >= MATERIAL * first and server >= MATERIAL_MS else None


def _spearman(means: np.ndarray) -> float:
    """Spearman's rho of the values with their order (average ranks for ties); 0 for a constant series."""
    if np.ptp(means) == 0:
        return 0.0
    order = np.argsort(means, kind="mergesort")
    ranks = np.empty(len(means))
    ranks[order] = np.arange(1, len(means) + 1)
    for value in np.unique(means):  # ties share their average rank
        tied = means == value
        ranks[tied] = ranks[tied].mean()
    return float(np.corrcoef(np.arange(len(means)), ranks)[0, 1])


def _unexplained(diff: float, late: float) -> float:
    """The size of a difference in a metric's mean (ms) less what the client's extra lateness over the same
    requests (ms, same sign convention) explains: lateness only makes a time stamp later, so it explains a
    difference in its own direction, up to the whole of it, and nothing of one in the other."""
    if diff * late <= 0:
        return abs(diff)
    return max(0.0, abs(diff) - abs(late))


def _material(values: np.ndarray, cut: int, late: np.ndarray) -> bool:
    """Whether the first `cut` values differ from the rest, beyond what the client's extra lateness over them
    explains (`late`: each value's, ms), by `MATERIAL` of the rest's mean and by `SIGNIFICANCE` standard errors of
    its batch means (the head's mean over cut/5 batches, the rest's over its own)."""
    head, rest = values[:cut], values[cut:]
    if not cut or len(rest) < 2 * BATCH:
        return False
    after = float(rest.mean())
    diff = _unexplained(float(head.mean()) - after, float(late[:cut].mean() - late[cut:].mean()))
    means = rest[: len(rest) // BATCH * BATCH].reshape(-1, BATCH).mean(axis=1)
    error = float(means.std(ddof=1)) * np.sqrt(BATCH / cut + 1 / len(means))
    return diff >= max(MATERIAL * after, MATERIAL_MS) and diff >= SIGNIFICANCE * error


def _trimmed(values: np.ndarray, cut: int, late: np.ndarray) -> int:
    """MSER-5's cut moved back over the batches just before it that already look steady: MSER minimizes the
    error of the mean, and on a noisy steady part it often cuts some of it too (a step at 15 of 60 noisy values,
    cut at 30), so the transient would be reported longer than it was. A batch is steady unless its mean differs from
    the steady batch means' by `MATERIAL` and by `SIGNIFICANCE` of their standard deviations, beyond what the
    client's extra lateness over its requests explains."""
    rest = values[cut:]
    if cut == 0 or len(rest) < 2 * BATCH:
        return cut
    means = rest[: len(rest) // BATCH * BATCH].reshape(-1, BATCH).mean(axis=1)
    centre, spread = float(means.mean()), float(means.std(ddof=1))
    usual = float(late[cut:].mean())
    while cut:
        batch = slice(cut - BATCH, cut)
        diff = _unexplained(float(values[batch].mean()) - centre, float(late[batch].mean()) - usual)
        if diff >= max(MATERIAL * centre, MATERIAL_MS) and diff >= SIGNIFICANCE * spread:
            break
        cut -= BATCH
    return cut


class _Series:
    """The measured requests in send order and, per metric, the values of those that have one and no stall touched,
    with each value's position among the requests."""

    def __init__(self, records: Sequence[RequestRecord]) -> None:
        stalled = touched(records, find_stalls(records))
        kept = sorted(
            (r for r, hit in zip(records, stalled, strict=True) if r.phase == "measure" or r.transient),
            key=lambda r: r.sent_ns,
        )
        hit_at = {id(r) for r, hit in zip(records, stalled, strict=True) if hit}
        self.requests = kept
        first_hit = next((i for i, r in enumerate(kept) if id(r) in hit_at), len(kept))
        self.limit = first_hit  # a transient never reaches past the first request a stall touched
        self.values: dict[Metric, tuple[np.ndarray, np.ndarray]] = {}
        self.late: dict[Metric, np.ndarray] = {}  # each value's client lateness (ms), beside it
        for metric in ("ttft", "itl"):
            pos, val, late = [], [], []
            for i, r in enumerate(kept):
                v = _value(r, metric)
                if v is not None and id(r) not in hit_at:
                    pos.append(i)
                    val.append(v)
                    late.append(_lateness(r, metric))
            self.values[metric] = (np.array(pos, dtype=int), np.array(val, dtype=float))
            self.late[metric] = np.array(late, dtype=float)

    def transient(self, start: int = 0) -> tuple[int, Metric | None, float | None, float | None]:
        """The longest material MSER-5 transient over the requests from `start` on: (requests it covers, metric,
        its mean and the rest's in ms). One that ties push past half the requests is none (MSER's own
        bound)."""
        best: tuple[int, Metric | None, float | None, float | None] = (0, None, None, None)
        for metric, (pos, val) in self.values.items():
            mask = pos >= start
            p, v, late = pos[mask], val[mask], self.late[metric][mask]
            if len(v) < MIN_VALUES:
                continue
            cut = _trimmed(v, mser5(v), late)
            if not _material(v, cut, late):
                continue
            requests = min(self._after_ties(int(p[cut]) if cut < len(p) else len(self.requests)), self.limit) - start
            if requests > best[0] and start + requests <= len(self.requests) // 2:
                best = (requests, metric, float(v[:cut].mean()), float(v[cut:].mean()))
        return best

    def trend(self, start: int) -> str | None:
        """The first metric that still trends after `start`, said in words."""
        for metric, (pos, val) in self.values.items():
            v = val[pos >= start]
            change = trend(v, self.late[metric][pos >= start])
            if change is not None:
                third = len(v) // 3
                return (
                    f"{metric.upper()} {'rose' if change > 0 else 'fell'} {abs(change):.0%} from the first third "
                    f"of the window to the last ({np.mean(v[:third]):.1f} → {np.mean(v[-third:]):.1f} ms)"
                )
        return None

    def _after_ties(self, cut: int) -> int:
        """A cut moved past the requests sent at the same instant as the last one it takes: which of a wave sent
        together (a closed loop's first, on the simulator's clock) comes first is no order in time."""
        while 0 < cut < len(self.requests) and self.requests[cut].sent_ns == self.requests[cut - 1].sent_ns:
            cut += 1
        return cut

    def change(self, cut: int) -> tuple[Metric | None, float | None, float | None]:
        """The metric that changed most across a cut already made, with its mean on both sides (ms)."""
        sides = {
            metric: (float(val[pos < cut].mean()), float(val[pos >= cut].mean()))
            for metric, (pos, val) in self.values.items()
            if (pos < cut).any() and (pos >= cut).any()
        }
        if not sides:
            return None, None, None
        metric = max(sides, key=lambda m: abs(sides[m][0] / sides[m][1] - 1) if sides[m][1] else 0.0)
        return metric, *sides[metric]

    def unjudged(self) -> str | None:
        """Why the window cannot be judged (None: it can): too few values, or a burst — every request scheduled
        at one instant, so their order is a queue's, not time's, and TTFT grows along it by design."""
        if len({r.scheduled_ns for r in self.requests}) == 1 and len(self.requests) > 1:
            return "a burst: every measured request was sent at one instant"
        if len(self.values["ttft"][1]) < MIN_VALUES:
            return f"fewer than {MIN_VALUES} measured requests with a TTFT"
        return None


def _value(r: RequestRecord, metric: Metric) -> float | None:
    """A request's TTFT, or its mean gap between chunks, in ms (None: failed, not streamed, too short)."""
    if not r.ok or not r.chunk_ns:
        return None
    if metric == "ttft":
        return (r.chunk_ns[0] - r.sent_ns) / 1e6
    if len(r.chunk_ns) < 2:
        return None
    return (r.chunk_ns[-1] - r.chunk_ns[0]) / (len(r.chunk_ns) - 1) / 1e6


def _lateness(r: RequestRecord, metric: Metric) -> float:
    """How late (ms) the client's own loop can have made a request's value: the loop's lag while it waited for
    its first chunk (TTFT), or while it streamed, spread over its gaps (ITL); 0 where not measured. A late first
    read also squeezes the gaps after it (chunks that waited are read together); that was under 0.5 ms per gap
    with the loop held 25 ms in every 35, inside `MATERIAL_MS`, so ITL's lateness is taken to stretch it only."""
    if metric == "ttft":
        return r.loop_lag_first_ns / 1e6
    return r.loop_lag_stream_ns / (len(r.chunk_ns) - 1) / 1e6


def steady_state(records: Sequence[RequestRecord]) -> SteadyState:
    """The verdict over a run's records: the transient the run already counted as warm-up (`settle`), or one it
    still measures, and the trend left in the window after it."""
    series = _Series(records)
    if (unjudged := series.unjudged()) is not None:
        return SteadyState(judged=False, steady=True, unjudged=unjudged)
    moved = sum(r.transient for r in series.requests)
    if moved:
        count, metric, before, after = moved, *series.change(moved)
    else:
        count, metric, before, after = series.transient()
    left = series.trend(count)
    t0 = min((r.sent_ns for r in records), default=0)
    end = series.requests[count].sent_ns if count < len(series.requests) else None
    return SteadyState(
        judged=True,
        steady=left is None and (moved > 0 or count == 0),
        transient=count,
        moved=moved > 0,
        ended_at_s=(end - t0) / 1e9 if count and end is not None else None,
        metric=metric,
        before_ms=before,
        after_ms=after,
        trend=left,
    )


def settle(records: Sequence[RequestRecord]) -> int:
    """Counts a run's start-up transient as warm-up: the leading measured requests MSER-5 cuts (when material, and
    the window after them does not trend) get phase `warmup` and `transient` set. Changes the records in place;
    returns how many it moved. A run already settled is left alone, so settling twice moves nothing more."""
    if any(r.transient for r in records):
        return 0
    series = _Series(records)
    if series.unjudged() is not None:
        return 0
    count, *_ = series.transient()
    if not count or series.trend(count) is not None:
        return 0
    for r in series.requests[:count]:
        r.phase = "warmup"
        r.transient = True
    return count
