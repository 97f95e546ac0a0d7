"""Fitting the step-time coefficients to measured runs (the profile that stores them: `profile.py`).

A measured run is what servetune's client recorded against a real engine: the closed-loop concurrency and the
`RequestRecord` of every measured request (prompt and output tokens, timeline); the engine's flags give the
simulated deployment. The fit replays every run through the simulator (same requests, same order, same
concurrency) and compares the `Summary` of the replay with the measured one — median TTFT, median TPOT and
output throughput, by `metrics.summary.summarize` on both sides — moving the coefficients (bandwidth and FLOP
efficiencies, per-step, per-sequence and per-request overheads) to minimise the squared log-errors. Log-errors
weigh a 10% miss equally at 50 ms and at 5 s; the optimiser is Nelder–Mead on log-coefficients (a handful of
parameters; the objective is deterministic but not smooth, because the scheduler is discrete).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from servetune.errors import ServetuneError
from servetune.load.shape import LoadShape, Timeouts
from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import Summary, summarize
from servetune.plan.roofline import Efficiency
from servetune.sim.steptime import StepCoefficients
from servetune.sim.virtual import VirtualConversation, VirtualServer, VirtualTurn

if TYPE_CHECKING:
    from servetune.sim.deployment import SimDeployment

# Fitted coefficients: efficiencies through a logistic onto (0, 1.2), overheads through exp (both smooth,
# so the optimiser never meets a flat clamp).
FITTED = ("bandwidth", "mfu_prefill", "mfu_decode", "step_overhead_s", "per_seq_overhead_s", "request_overhead_s")
EFF_MAX = 1.2
PRIOR_WEIGHT = 0.001
TARGETS = ("ttft_p50_s", "tpot_p50_s", "output_throughput")
"""The figures a fit matches and the fidelity table reports (from a `Summary`; times in seconds)."""
_NO_TIMEOUTS = Timeouts(first_token_s=math.inf, inter_token_s=math.inf, request_s=math.inf)
"""A replay never times out: the measured requests did not, and a fit's trial coefficients must not turn a slow
guess into failed requests (the objective would jump)."""


@dataclass(frozen=True)
class MeasuredRun:
    """A closed-loop run against a real engine, with the simulated deployment of that engine's flags.

    `records`: the measured, successful requests in send order. `untimed`: positions of records whose stream
    timeline cannot be trusted (see `results.py`): they count for the load and the throughput, not for TTFT and
    TPOT, on the measured and the simulated side alike."""

    name: str
    concurrency: int
    records: tuple[RequestRecord, ...]
    deployment: SimDeployment
    untimed: frozenset[int] = frozenset()


def replay(run: MeasuredRun, coef: StepCoefficients | None = None) -> list[RequestRecord]:
    """The run's requests (lengths, order, concurrency) through a fresh simulated engine with coefficients `coef`
    (default: the deployment's); the simulated records in the order of `run.records`."""
    convs = []
    for i, r in enumerate(run.records):
        n = r.prompt_tokens or r.prompt_tokens_expected or 0  # results.py makes sure one is there
        convs.append(VirtualConversation(i, r.traffic_class, (VirtualTurn(n, r.output_tokens, n, (((i,), n),)),)))
    shape = LoadShape.closed(run.concurrency, requests=len(convs), timeouts=_NO_TIMEOUTS)
    records = VirtualServer(run.deployment, coef).run(convs.__getitem__, shape)
    return sorted(records, key=lambda r: r.index)


def _trusted(records: Sequence[RequestRecord], untimed: frozenset[int]) -> list[RequestRecord]:
    """The records with the untrusted stream timelines left out (their chunk times dropped)."""
    if not untimed:
        return list(records)
    return [
        r.model_copy(update={"chunk_ns": [], "first_content_ns": None}) if i in untimed else r
        for i, r in enumerate(records)
    ]


def measured_summary(run: MeasuredRun) -> Summary:
    return summarize(_trusted(run.records, run.untimed))


def simulated_summary(run: MeasuredRun, coef: StepCoefficients | None = None) -> Summary:
    """The summary of the replay, over the same requests as the measured one."""
    return summarize(_trusted(replay(run, coef), run.untimed))


def targets(summary: Summary) -> dict[str, float]:
    """The fitted figures of a summary (NaN where it has none, e.g. no trusted timeline)."""

    def seconds(ms: float | None) -> float:
        return math.nan if ms is None else ms / 1000

    return {
        "ttft_p50_s": seconds(summary.ttft_ms.p50),
        "tpot_p50_s": seconds(summary.tpot_ms.p50),
        "output_throughput": summary.output_throughput,
    }


def relative_errors(sim: Summary, real: Summary) -> dict[str, float]:
    """(sim − real) / real for each target the measured run has."""
    got, want = targets(sim), targets(real)
    return {k: (got[k] - v) / v for k, v in want.items() if v and not math.isnan(v)}


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
    real = [measured_summary(r) for r in runs]
    x0 = _encode(start)

    def objective(x: np.ndarray) -> float:
        coef = _decode(start, x)
        misfit = sum(_loss(relative_errors(simulated_summary(r, coef), t)) for r, t in zip(runs, real, strict=True))
        return misfit + PRIOR_WEIGHT * float(np.sum((x - x0) ** 2))

    x = nelder_mead(objective, x0, step=0.5, iters=iters // 2)
    x = nelder_mead(objective, x, step=0.2, iters=iters - iters // 2)
    best = _decode(start, x)
    errors = {r.name: relative_errors(simulated_summary(r, best), t) for r, t in zip(runs, real, strict=True)}
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
    for name, xi in zip(FITTED, x, strict=True):
        if name in eff and name != "step_overhead_s":
            eff[name] = EFF_MAX / (1 + math.exp(-float(xi)))
        elif name in eff:
            eff[name] = math.exp(float(xi))
        else:
            top[name] = math.exp(float(xi))
    top["efficiency"] = Efficiency(**eff)
    return StepCoefficients(**top)
