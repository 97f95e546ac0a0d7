"""Simulated time: `sim-serve --time-scale S` runs S simulated seconds per wall second, so a probe's wall-clock
figures against it are S times too fast.  The runner converts each probe result once, as it is stored (times
× S, rates ÷ S), and records S in the `RunResult`; SLOs handed to the probes are divided by S so that their
in-probe verdicts (the load curve's goodput) judge wall-clock latencies against the same simulated bound."""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.suite.result import ProbeResult
from servetune.tune.experiment import SLO_LATENCY_KEY

TIME_SCALE_FLAG = "time-scale"


def time_scale(config: EngineConfig) -> float:
    """Simulated seconds per wall second of a launch: the sim's `time-scale` flag, 1 for real engines."""
    if config.engine != "sim":
        return 1.0
    value = config.flags.get(TIME_SCALE_FLAG)
    try:
        scale = float(value) if value is not None and not isinstance(value, bool | dict | list) else 1.0
    except ValueError:
        return 1.0
    return scale if scale > 0 else 1.0


def _factor(name: str, scale: float) -> float:
    """How a figure named by the suite's conventions converts: rates (…tok_s, …_rps) ÷ S, durations (…_ms,
    …_s) × S, everything else (counts, percentages, concurrency, error rate) unchanged."""
    if name.endswith("tok_s") or name.endswith("_rps"):
        return 1 / scale
    if name.endswith("_ms") or name.endswith("_s"):
        return scale
    return 1.0


def _convert(values: dict, scale: float) -> dict:
    return {k: v * _factor(k, scale) if isinstance(v, int | float) else v for k, v in values.items()}


def to_simulated_time(result: ProbeResult, scale: float) -> ProbeResult:
    """A probe result measured against a time-scaled simulator, in simulated (real-GPU) time.  The engine's
    /metrics deltas are left alone: sim-serve already reports its histograms in simulated time."""
    if scale == 1.0:
        return result
    return result.model_copy(
        update={
            "figures": _convert(result.figures, scale),
            "points": [_convert(point, scale) for point in result.points],
            "notes": [*result.notes, f"sim-serve ran at --time-scale {scale:g}: figures converted to simulated time"],
        }
    )


def wall_clock_slos(slos: dict[str, float], scale: float) -> dict[str, float]:
    """The latency SLOs as wall-clock bounds against a time-scaled simulator (error rate etc. unchanged)."""
    if scale == 1.0:
        return dict(slos)
    return {k: v / scale if SLO_LATENCY_KEY.match(k) else v for k, v in slos.items()}
