"""Fitting the step-time coefficients to measured runs (the profile that stores them: `profile.py`).

A measured run is what servetune's client recorded against a real engine: the engine's flags, the
closed-loop concurrency and, per request, prompt length, output length and timestamps. The fit replays
every run through the simulator (same requests, same order, same concurrency) and moves the
coefficients (bandwidth and FLOP efficiencies, per-step, per-sequence and per-request overheads) to
minimise the squared log-errors of median TTFT, median TPOT and output throughput. Log-errors weigh a
10% miss equally at 50 ms and at 5 s; the optimiser is Nelder–Mead on log-coefficients (a handful of
parameters; the objective is deterministic but not smooth, because the scheduler is discrete).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from servetune.errors import ServetuneError
from servetune.plan.roofline import Efficiency
from servetune.sim.steptime import StepCoefficients
from servetune.sim.virtual import RequestSpec, run_virtual

if TYPE_CHECKING:
    from servetune.sim.deployment import SimDeployment

# Fitted coefficients: efficiencies through a logistic onto (0, 1.2), overheads through exp (both smooth,
# so the optimiser never meets a flat clamp).
FITTED = ("bandwidth", "mfu_prefill", "mfu_decode", "step_overhead_s", "per_seq_overhead_s", "request_overhead_s")
EFF_MAX = 1.2
PRIOR_WEIGHT = 0.001


@dataclass(frozen=True)
class MeasuredRequest:
    """One measured request: lengths and client-side timestamps (seconds, any common origin).

    `first_token` is None when the record's first-chunk time cannot be trusted (see `results.py`): the
    request still counts for the load and the throughput, not for TTFT/TPOT.
    """

    prompt_tokens: int
    output_tokens: int
    sent: float
    first_token: float | None
    end: float


@dataclass(frozen=True)
class MeasuredRun:
    """A closed-loop run against a real engine, with the simulated deployment of that engine's flags."""

    name: str
    concurrency: int
    requests: tuple[MeasuredRequest, ...]
    deployment: SimDeployment

    def specs(self) -> list[RequestSpec]:
        return [RequestSpec(r.prompt_tokens, r.output_tokens) for r in self.requests]


@dataclass(frozen=True)
class Targets:
    """The figures a fit matches and the fidelity table reports."""

    ttft_p50: float
    tpot_p50: float
    throughput: float

    def as_dict(self) -> dict[str, float]:
        return {"ttft_p50_s": self.ttft_p50, "tpot_p50_s": self.tpot_p50, "output_throughput": self.throughput}


def _tpot(e2e: float, ttft: float, n: int) -> float | None:
    return (e2e - ttft) / (n - 1) if n > 1 else None


def measured_targets(run: MeasuredRun) -> Targets:
    """Median TTFT and TPOT over the requests with a trusted first token; throughput over all."""
    reqs = run.requests
    timed = [r for r in reqs if r.first_token is not None]
    ttft = [r.first_token - r.sent for r in timed]
    tpot = [t for r in timed if (t := _tpot(r.end - r.sent, r.first_token - r.sent, r.output_tokens)) is not None]
    dur = max(r.end for r in reqs) - min(r.sent for r in reqs)
    return Targets(_median(ttft), _median(tpot), sum(r.output_tokens for r in reqs) / dur)


def simulated_targets(run: MeasuredRun, coef: StepCoefficients) -> Targets:
    """The same requests, order and concurrency through the simulator with coefficients `coef`; medians
    over the same requests as the measured ones."""
    timing = replace(run.deployment.timing, coef=coef)
    sim = run_virtual(run.specs(), run.deployment.limits, timing, concurrency=run.concurrency)
    timed = [t for t, r in zip(sim.timelines, run.requests) if r.first_token is not None]
    ttft = [t.ttft for t in timed]
    tpot = [x for t in timed if (x := _tpot(t.e2e, t.ttft, t.output_tokens)) is not None]
    out = sum(t.output_tokens for t in sim.timelines)
    return Targets(_median(ttft), _median(tpot), out / sim.duration)


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else math.nan


def relative_errors(sim: Targets, real: Targets) -> dict[str, float]:
    """(sim − real) / real for each target."""
    return {k: (sim.as_dict()[k] - v) / v for k, v in real.as_dict().items() if v and not math.isnan(v)}


def _loss(errors: dict[str, float]) -> float:
    return sum(math.log1p(e) ** 2 if e > -1 else 100.0 for e in errors.values())


def nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.3, iters: int = 200, tol: float = 1e-5
) -> np.ndarray:
    """Minimises f from x0 (standard reflection/expansion/contraction/shrink coefficients)."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < tol:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        xr = centroid + (centroid - worst)
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + 2 * (centroid - worst)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (worst - centroid)
            fc = f(xc)
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                best = simplex[0]
                simplex = [best] + [best + 0.5 * (x - best) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]


def fit_coefficients(
    runs: Sequence[MeasuredRun],
    start: StepCoefficients | None = None,
    iters: int = 300,
) -> tuple[StepCoefficients, dict[str, dict[str, float]]]:
    """Coefficients that make the simulator reproduce `runs`; and each run's relative errors after the fit.

    A weak pull towards the starting values (the planner's defaults) keeps coefficients that the runs do
    not constrain (e.g. decode MFU when every decode is memory-bound) where they were instead of drifting.
    Nelder–Mead restarts once from its best point (a fresh simplex escapes a collapsed one).
    """
    if not runs:
        raise ServetuneError("nothing to calibrate on", "give result files of measured runs")
    start = start or StepCoefficients()
    real = [measured_targets(r) for r in runs]
    x0 = _encode(start)

    def objective(x: np.ndarray) -> float:
        coef = _decode(start, x)
        misfit = sum(_loss(relative_errors(simulated_targets(r, coef), t)) for r, t in zip(runs, real))
        return misfit + PRIOR_WEIGHT * float(np.sum((x - x0) ** 2))

    x = nelder_mead(objective, x0, step=0.5, iters=iters // 2)
    x = nelder_mead(objective, x, step=0.2, iters=iters - iters // 2)
    best = _decode(start, x)
    errors = {r.name: relative_errors(simulated_targets(r, best), t) for r, t in zip(runs, real)}
    return best, errors


def _encode(coef: StepCoefficients) -> np.ndarray:
    eff = coef.efficiency.model_dump()
    out = []
    for name in FITTED:
        if name in eff and name != "step_overhead_s":
            p = eff[name] / EFF_MAX
            out.append(math.log(p / (1 - p)))
        else:
            out.append(math.log(max(eff.get(name, getattr(coef, name, 0.0)), 1e-9)))
    return np.array(out)


def _decode(start: StepCoefficients, x: np.ndarray) -> StepCoefficients:
    """Coefficients from the optimiser's unbounded parameters."""
    eff = start.efficiency.model_dump()
    top = start.model_dump()
    for name, xi in zip(FITTED, x):
        if name in eff and name != "step_overhead_s":
            eff[name] = EFF_MAX / (1 + math.exp(-float(xi)))
        elif name in eff:
            eff[name] = math.exp(float(xi))
        else:
            top[name] = math.exp(float(xi))
    top["efficiency"] = Efficiency(**eff)
    return StepCoefficients(**top)
