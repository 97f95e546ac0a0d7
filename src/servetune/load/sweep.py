"""A sweep over concurrencies or rates that stops at saturation (`servetune.load.saturation` decides)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from servetune.load.runner import LoadResult, run_load
from servetune.load.saturation import SATURATION, Saturation
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


async def run_sweep(
    base_url: str,
    model: str,
    workload: Workload,
    shape: LoadShape,
    levels: Sequence[float],
    *,
    stop_at_saturation: bool = True,
    rule: Saturation = SATURATION,
    on_level: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> SweepResult:
    """Runs `shape` at each level (concurrency or rate) in order; stops after the first saturated point.
    `on_level` hears of each level before its requests start (a journal of records groups them by it)."""
    points: list[SweepPoint] = []
    best: float | None = None
    for level in levels:
        if on_level is not None:
            on_level(level)
        point_shape = shape.with_level(level)
        result = await run_load(base_url, model, workload, point_shape, **kwargs)
        points.append(SweepPoint(level=level, result=result))
        reason = rule.judge(
            result.summary,
            result.records,
            offered_rate=point_shape.rate if point_shape.kind == "rate" else None,
            best_before=best,
        )
        if reason is not None and stop_at_saturation:
            return SweepResult(points=points, saturated_at=level, reason=reason)
        best = max(best or 0.0, result.summary.output_throughput)
    return SweepResult(points=points, saturated_at=None, reason=None)
