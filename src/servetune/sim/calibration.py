"""Fitting the step-time coefficients to measured runs (the profile that stores them: `profile.py`).

A measured run is one load point that servetune's client sent to a real engine: the `LoadShape` it was offered
(closed loop with its warm-up, or open-loop arrivals at a rate and seed), the `RequestRecord` of every request
(warm-ups included, marked by phase: their lengths and timeline), and the engine's flags as a simulated
deployment. Runs of one engine launch replay in their order on one simulated server, so what earlier points left
in the prefix cache is hit again exactly where the real server hit it: prompts of servetune's synthetic workloads
are a function of (workload seed, request index) whose beginning does not depend on the length, so two requests
with equal keys share their first min(length) tokens (`VirtualTurn` segments keyed so).

The fit replays the launches and compares the `Summary` of each scored run's measured requests with the measured
one — median TTFT, median TPOT and output throughput, by `metrics.summary.summarize` on both sides; a fit by part
also vLLM's split of the mean TTFT (`PARTS`, from `metrics.engine_time` on both sides) — moving the
coefficients (bandwidth and FLOP efficiencies, GPU per-step and per-sequence overheads, the API server's
per-request time, the CPU launch times of decode and prefill steps) to minimise the squared log-errors. Log-errors
weigh a 10% miss equally at 50 ms and at 5 s; the optimiser is Nelder–Mead on log-coefficients (a handful of
parameters; the objective is deterministic but not smooth, because the scheduler is discrete).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from servetune.errors import ServetuneError
from servetune.load.shape import LoadShape, Timeouts
from servetune.metrics.engine_time import EngineTime
from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import Summary, summarize
from servetune.plan.roofline import Efficiency
from servetune.sim.steptime import StepCoefficients
from servetune.sim.virtual import RunTrace, Segment, VirtualConversation, VirtualServer, VirtualTurn

if TYPE_CHECKING:
    from servetune.sim.deployment import SimDeployment

# Fitted coefficients: efficiencies through a logistic onto (0, 1.2), times through exp (both smooth, so the
# optimiser never meets a flat clamp).
FITTED = (
    "bandwidth",
    "mfu_prefill",
    "mfu_decode",
    "step_overhead_s",
    "per_seq_overhead_s",
    "request_overhead_s",
    "request_token_s",
    "cpu_step_s",
    "cpu_prefill_step_s",
)
EFF_MAX = 1.2
PRIOR_WEIGHT = 0.001
SPREAD = 2.0
"""Half-width of the random starts in the optimiser's space: efficiencies' logits and times' logs (x7 either way)."""
TARGETS = ("ttft_p50_s", "tpot_p50_s", "output_throughput")
"""The figures a fit matches and the fidelity table reports (from a `Summary`; times in seconds)."""
PARTS = ("prefill_ms", "wait_ms")
"""The parts of the mean TTFT a fit by part matches too, from the engine's split (`metrics.engine_time`): the
prefill part (first scheduled → first token) and the wait before it (vLLM's TTFT − prefill: the engine core's
queue and the API server's part together). Both sides stamp the hand-over between the two where vLLM does (the
engine core's loop taking the request in, after the step it arrived during: `SimEngine.step`'s `taken_in`), but
a request arriving near a step's end lands on either side of it by a step's length, so the fit matches their sum."""
_NO_TIMEOUTS = Timeouts(first_token_s=math.inf, inter_token_s=math.inf, request_s=math.inf)
"""A replay never times out: the measured requests did not, and a fit's trial coefficients must not turn a slow
guess into failed requests (the objective would jump)."""


@dataclass(frozen=True)
class MeasuredRun:
    """One load point measured against a real engine, with the simulated deployment of that engine's flags.

    `records`: the successful requests in send order, warm-ups included (their `phase` says which are measured).
    `untimed`: positions among the measured ones (`measured`) whose stream timeline cannot be trusted (see
    `results.py`): they count for the load and the throughput, not for TTFT and TPOT, on the measured and the
    simulated side alike. Runs with the same `launch` ran in this order on one engine (`replay_launch`). `seed`: the
    workload's seed, when the prompts were servetune's synthetic ones (their text is a function of seed and
    index); None makes every prompt unique. `prefixes`: per traffic class, the shared prefix (tokens, groups).
    `scored`: False for a run replayed only for the state it leaves (a warm-up point). `engine_time`: the engine's
    split of the run's TTFT as measured (vLLM's `/metrics` around it), for a fit by part."""

    name: str
    shape: LoadShape
    records: tuple[RequestRecord, ...]
    deployment: SimDeployment
    untimed: frozenset[int] = frozenset()
    launch: str = ""
    seed: int | None = None
    prefixes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    scored: bool = True
    engine_time: EngineTime | None = None

    @property
    def measured(self) -> tuple[RequestRecord, ...]:
        """The measured requests (phase `measure`), in send order."""
        return tuple(r for r in self.records if r.phase == "measure")


def _segments(run: MeasuredRun, r: RequestRecord, prompt: int) -> tuple[Segment, ...]:
    """What the prompt is made of, for the prefix cache (see the module docstring)."""
    key: Hashable = (run.seed, r.index, r.turn) if run.seed is not None else (run.launch, run.name, r.index, r.turn)
    shared, groups = run.prefixes.get(r.traffic_class, (0, 1))
    if shared and shared < prompt:
        base = run.seed if run.seed is not None else (run.launch, run.name)
        return (((base, "prefix", r.traffic_class, r.index % max(groups, 1)), shared), (key, prompt - shared))
    return ((key, prompt),)


def _source(run: MeasuredRun) -> Callable[[int], VirtualConversation]:
    """Conversation `index` as it was sent (its turns' lengths and content); an index no record holds (a cool-down
    request nobody kept) repeats the lengths of a recorded one."""
    turns: dict[int, list[RequestRecord]] = {}
    for r in run.records:
        turns.setdefault(r.index, []).append(r)
    convs: dict[int, VirtualConversation] = {}
    for index, rs in turns.items():
        out = []
        for r in sorted(rs, key=lambda x: x.turn):
            n = r.prompt_tokens or r.prompt_tokens_expected or 0  # results.py makes sure one is there
            out.append(VirtualTurn(n, r.output_tokens, n, _segments(run, r, n)))
        convs[index] = VirtualConversation(index, rs[0].traffic_class, tuple(out))
    known = sorted(convs)

    def source(index: int) -> VirtualConversation:
        got = convs.get(index)
        if got is not None:
            return got
        like = convs[known[index % len(known)]]
        return VirtualConversation(index, like.cls, like.turns)

    return source


@dataclass(frozen=True)
class Replayed:
    """One run's replay: the simulated records of its measured requests (in the order of `run.measured`), and the
    simulated engine's prefix-cache hit rate over the run (tokens; None with prefix caching off); when asked, the
    simulated engine's split of the run's TTFT (its `/metrics` around the run, every request of it, read as vLLM's)
    and the trace of where each request's time went (`explain.py`)."""

    records: list[RequestRecord]
    prefix_hit_rate: float | None
    engine_time: EngineTime | None = None
    trace: RunTrace | None = None


def replay_launch(
    runs: Sequence[MeasuredRun],
    coef: StepCoefficients | None = None,
    *,
    account: bool = False,
    intervals_only: bool = False,
) -> dict[str, Replayed]:
    """Runs of one launch, in order, through one fresh simulated server with coefficients `coef` (default: the
    deployment's); `account`: with each run's engine split and trace (it costs a `/metrics` rendering per run, so
    the fit goes without); `intervals_only`: with the split's request intervals alone, no trace (what a fit by
    part reads, at a tenth of the cost)."""
    if not runs:
        return {}
    server = VirtualServer(runs[0].deployment, coef)
    counters = server.engine.scheduler.counters
    caching = runs[0].deployment.limits.enable_prefix_caching
    out: dict[str, Replayed] = {}
    for run in runs:
        queries, hits = counters.prefix_queries, counters.prefix_hits
        before = server.snapshot(intervals_only=intervals_only) if account or intervals_only else None
        trace = RunTrace() if account else None
        shape = run.shape.model_copy(update={"timeouts": _NO_TIMEOUTS})
        records = server.run(_source(run), shape, trace=trace)
        by_key = {(r.index, r.turn): r for r in records if r.phase == "measure"}
        asked = counters.prefix_queries - queries
        out[run.name] = Replayed(
            [by_key[(r.index, r.turn)] for r in run.measured if (r.index, r.turn) in by_key],
            (counters.prefix_hits - hits) / asked if caching and asked else None,
            server.engine_time(before, records, intervals_only=intervals_only) if before is not None else None,
            trace,
        )
    return out


def replay(run: MeasuredRun, coef: StepCoefficients | None = None) -> list[RequestRecord]:
    """One run alone on a fresh simulated server (see `replay_launch`): the simulated measured records."""
    return replay_launch([run], coef)[run.name].records


def launches(runs: Sequence[MeasuredRun]) -> list[list[MeasuredRun]]:
    """The runs grouped by launch, each group in the given order (the order they ran in)."""
    groups: dict[str, list[MeasuredRun]] = {}
    for run in runs:
        groups.setdefault(run.launch, []).append(run)
    return list(groups.values())


def trusted(records: Sequence[RequestRecord], untimed: frozenset[int]) -> list[RequestRecord]:
    """The records with the untrusted stream timelines left out (their chunk times dropped)."""
    if not untimed:
        return list(records)
    return [
        r.model_copy(update={"chunk_ns": [], "first_content_ns": None}) if i in untimed else r
        for i, r in enumerate(records)
    ]


def measured_summary(run: MeasuredRun) -> Summary:
    return summarize(trusted(run.measured, run.untimed))


def replay_all(
    runs: Sequence[MeasuredRun],
    coef: StepCoefficients | None = None,
    *,
    account: bool = False,
    intervals_only: bool = False,
) -> dict[str, Replayed]:
    """Every run's replay, launch by launch (`replay_launch`)."""
    out: dict[str, Replayed] = {}
    for group in launches(runs):
        out.update(replay_launch(group, coef, account=account, intervals_only=intervals_only))
    return out


def simulated_summaries(runs: Sequence[MeasuredRun], coef: StepCoefficients | None = None) -> dict[str, Summary]:
    """The summary of each run's replay (launch by launch), over the same requests as the measured one."""
    replayed = replay_all(runs, coef)
    return {run.name: summarize(trusted(replayed[run.name].records, run.untimed)) for run in runs}


def simulated_summary(run: MeasuredRun, coef: StepCoefficients | None = None) -> Summary:
    """The summary of one run's replay on a fresh server."""
    return simulated_summaries([run], coef)[run.name]


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


def part_targets(split: EngineTime | None) -> dict[str, float]:
    """The parts of a split's mean TTFT that a fit by part matches (`PARTS`; none without vLLM's histograms)."""
    if split is None or split.ttft is None or split.prefill is None:
        return {}
    return {"prefill_ms": split.prefill.mean_ms, "wait_ms": split.ttft.mean_ms - split.prefill.mean_ms}


def run_errors(
    run: MeasuredRun, replayed: Replayed, by_part: bool = False, real: Summary | None = None
) -> dict[str, float]:
    """A run's relative errors: the summary's targets (`real`: its measured summary, if already made), and with
    `by_part` the TTFT's parts where both sides have them (a part measured at zero has no relative error)."""
    real = real if real is not None else measured_summary(run)
    errors = relative_errors(summarize(trusted(replayed.records, run.untimed)), real)
    if by_part:
        got, want = part_targets(replayed.engine_time), part_targets(run.engine_time)
        errors.update({k: (got[k] - v) / v for k, v in want.items() if k in got and v > 0})
    return errors


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
    samples: int = 48,
    seed: int = 0,
    by_part: bool = False,
) -> tuple[StepCoefficients, dict[str, dict[str, float]]]:
    """Coefficients that make the simulator reproduce the scored `runs`; and each scored run's relative errors
    after the fit. Unscored runs are replayed for the state they leave (launch by launch, in order). `by_part`:
    the TTFT's parts (`PARTS`) of the runs with a measured `engine_time` are matched too, each with the weight of
    a headline figure (a replay then reads the simulated request intervals around every run).

    The objective is not smooth (the scheduler is discrete) and has valleys where one cost stands in for another
    (a slow prefill MFU for a slow launch), so a single Nelder–Mead from the defaults stops in the first one: the
    fit first tries `samples` random points around the start (seeded: the same runs give the same fit), runs
    Nelder–Mead from the best three, and polishes the best result with a smaller simplex. A weak pull towards the
    starting values (the deployment's defaults) keeps coefficients that the runs do not constrain (e.g. decode MFU
    when every decode is memory-bound) where they were instead of drifting.
    """
    scored = [r for r in runs if r.scored]
    if not scored:
        raise ServetuneError("nothing to calibrate on", "give result files of measured runs")
    start = start or scored[0].deployment.timing.coef  # the deployment's: model-derived defaults filled in
    real = {r.name: measured_summary(r) for r in scored}
    x0 = _encode(start)

    def errors_of(coef: StepCoefficients) -> dict[str, dict[str, float]]:
        replayed = replay_all(runs, coef, intervals_only=by_part)
        return {r.name: run_errors(r, replayed[r.name], by_part, real[r.name]) for r in scored}

    def objective(x: np.ndarray) -> float:
        misfit = sum(_loss(errs) for errs in errors_of(_decode(start, x)).values())
        return misfit + PRIOR_WEIGHT * float(np.sum((x - x0) ** 2))

    rng = np.random.default_rng(seed)
    tried = [x0, *(x0 + rng.uniform(-SPREAD, SPREAD, len(x0)) for _ in range(samples))]
    values = [objective(x) for x in tried]
    seeds = [tried[i] for i in np.argsort(values)[:3]]
    found = [nelder_mead(objective, x, step=0.3, iters=iters // 2) for x in seeds]
    x = min(found, key=objective)
    x = nelder_mead(objective, x, step=0.1, iters=iters // 2)
    best = _decode(start, x)
    return best, errors_of(best)


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
