"""Running one probe: its spec's `run` on a backend, the engine's counters read before and after (their
difference is kept with the result), a probe's crash recorded as a failed result, and figures measured against a
time-scaled simulator converted to simulated (real-GPU) time once, by each figure's declared scaling."""

from __future__ import annotations

from typing import Any

from servetune.metrics.prometheus import delta
from servetune.suite.result import ProbeResult
from servetune.suite.spec import ProbeContext, ProbeSpec


async def run_probe(spec: ProbeSpec, ctx: ProbeContext, params: Any) -> ProbeResult:
    """One run of `spec` (never raises for what the server or the probe does: that is a result to record)."""
    before = await ctx.backend.scrape()
    try:
        result = await spec.run(ctx, params)
    except Exception as err:  # noqa: BLE001 - a probe's crash is a result to record, not a reason to stop
        result = ProbeResult(probe=spec.name, ok=False, error=f"{type(err).__name__}: {err}")
    after = await ctx.backend.scrape()
    if before is not None and after is not None:
        d = delta(before, after)
        named = {k: v for k, v in d.model_dump().items() if isinstance(v, float) and k != "duration_s"}
        counters = {k: v for k, v in d.counters.items() if v}
        result = result.model_copy(update={"engine_metrics": {**counters, **named, **result.engine_metrics}})
    return to_simulated_time(spec, result, ctx.backend.time_scale)


def to_simulated_time(spec: ProbeSpec, result: ProbeResult, scale: float) -> ProbeResult:
    """A result measured against `sim-serve --time-scale S`, in simulated time: each figure and point value
    converted by its spec's scaling (times × S, rates ÷ S). The engine's /metrics deltas are left alone:
    sim-serve reports its histograms in simulated time already."""
    if scale == 1.0:
        return result

    def convert(values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in values.items():
            figure = spec.figure(name)
            factor = figure.scale_factor(scale) if figure else 1.0
            out[name] = value * factor if isinstance(value, int | float) and value is not None else value
        return out

    return result.model_copy(
        update={
            "figures": convert(result.figures),
            "points": [convert(point) for point in result.points],
            "notes": [*result.notes, f"sim-serve ran at --time-scale {scale:g}: figures converted to simulated time"],
        }
    )
