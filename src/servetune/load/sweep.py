"""A sweep over concurrencies or rates that stops at saturation.

Saturation is judged from measured figures, not guessed: in closed loop, a point whose output throughput
grew less than `min_gain` over the previous point's (more concurrency only adds queueing); in open loop, a
point where the server completed less than `min_served` of the offered rate; in both, a point where more than
half of the requests failed.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from servetune.load.runner import LoadResult, run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload


class SweepPoint(BaseModel):
    level: float
    result: LoadResult


class SweepResult(BaseModel):
    points: list[SweepPoint]
    saturated_at: float | None  # the first level judged saturated (None: never within the sweep)
    reason: str | None

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent, exclude={"points": {"__all__": {"result": {"records"}}}})


def saturation(
    shape: LoadShape, previous: LoadResult | None, current: LoadResult, min_gain: float = 0.05, min_served: float = 0.9
) -> str | None:
    """Why `current` is saturated, or None."""
    s = current.summary
    total = s.completed + s.failed
    if total and s.failed / total > 0.5:
        return f"{s.failed} of {total} requests failed"
    if shape.kind == "rate" and shape.rate not in (None, float("inf")):
        served = served_ratio(current)
        if served is not None and served < min_served:
            return (
                f"the server completed requests at {100 * served:.0f}% of the offered rate ({shape.rate:g}/s offered)"
            )
    if previous is not None and previous.summary.output_throughput > 0:
        gain = s.output_throughput / previous.summary.output_throughput - 1
        if gain < min_gain:
            return f"output throughput grew {100 * gain:.1f}% (< {100 * min_gain:.0f}%) over the previous point"
    return None


def served_ratio(result: LoadResult) -> float | None:
    """Completion rate / arrival rate of the measured requests, from their own spans (no Poisson noise):
    about 1 while the server keeps up, below 1 when requests pile up."""
    done = sorted(r.done_ns for r in result.records if r.phase == "measure" and r.ok)
    sched = sorted(r.scheduled_ns for r in result.records if r.phase == "measure")
    if len(done) < 3 or sched[-1] == sched[0] or done[-1] == done[0]:
        return None
    return ((sched[-1] - sched[0]) / (len(sched) - 1)) / ((done[-1] - done[0]) / (len(done) - 1))


async def run_sweep(
    base_url: str,
    model: str,
    workload: Workload,
    shape: LoadShape,
    levels: Sequence[float],
    *,
    stop_at_saturation: bool = True,
    **kwargs,
) -> SweepResult:
    """Runs `shape` at each level (concurrency or rate) in order; stops after the first saturated point."""
    points: list[SweepPoint] = []
    previous: LoadResult | None = None
    for level in levels:
        point_shape = shape.with_level(level)
        result = await run_load(base_url, model, workload, point_shape, **kwargs)
        points.append(SweepPoint(level=level, result=result))
        reason = saturation(point_shape, previous, result)
        if reason is not None and stop_at_saturation:
            return SweepResult(points=points, saturated_at=level, reason=reason)
        previous = result
    return SweepResult(points=points, saturated_at=None, reason=None)
