"""Judging variants before launching any: the objective's probe — the very `ProbeSpec` the suite runs — is run
on the simulator (`servetune.sim.backend.SimBackend`) for each vLLM/sim variant, so the loop can launch the
predicted best first (`estimate.mode: order`) or launch only the best few (`prune`).

The simulator's order: variants predicted to miss the experiment's latency SLOs by more than a margin
(`SLO_MARGIN_PCT`) come after every other judged variant, least miss first — a variant that misses an SLO is never
ranked, however fast — and the rest go by the predicted objective. `order` launches in that order, `prune` keeps
its first `keep`.

Predictions are stored like a probe run named `estimate` (figures `<probe>.<figure>`, e.g.
`decode_speed.output_tok_s`), next to the measured ones: the report shows predicted and measured side by side,
and a pruned variant keeps its predicted figures. A probe the simulator cannot run (`simulable=False`, e.g.
memory headroom) cannot be an estimated objective (the loader rejects it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.metrics.slo import is_latency_slo, slo_miss
from servetune.process.interrupts import run_coroutine
from servetune.suite.registry import get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext, ProbeSpec
from servetune.tune.schema.experiment import Experiment, Objective
from servetune.tune.schema.variants import Variant
from servetune.tune.search.order import Standing, order_by_estimate, prune_by_estimate

if TYPE_CHECKING:
    from servetune.sim.profile import CalibrationProfile

ESTIMATE_PROBE = "estimate"
"""The store's probe name for the simulator's predictions of a variant."""


SLO_MARGIN_PCT = 25.0
"""How far past a latency SLO's bound a prediction must be for its variant to count as predicted to miss it, in % of
the bound: the simulator's latencies are planning values, tens of percent off where it is uncalibrated or models a
part of TTFT crudely, so a variant predicted just past a bound may well meet it when measured."""


@dataclass(frozen=True)
class Prediction:
    """One variant's predicted figures (`<probe>.<figure>`), or why it could not be judged."""

    figures: dict[str, float]
    objective: float | None
    reason: str | None = None
    slo_excess_pct: float | None = None
    """How far its predicted latency is past the experiment's latency SLOs, in % of the bound, where it is
    furthest (negative: inside every bound); None without latency SLOs or predicted latencies."""
    slo_text: str = ""
    """That latency against its bound, in words."""

    @property
    def misses_slos(self) -> bool:
        """Predicted to miss a latency SLO by more than `SLO_MARGIN_PCT`."""
        return self.slo_excess_pct is not None and self.slo_excess_pct > SLO_MARGIN_PCT

    def standing(self, goal: str) -> Standing | None:
        """Its place in the simulator's order, lower first (None: not judged): every variant predicted to meet
        the SLOs (or within the margin) by its objective, then those predicted to miss them, least miss first."""
        if self.objective is None:
            return None
        if self.misses_slos:
            assert self.slo_excess_pct is not None
            return (1.0, self.slo_excess_pct)
        return (0.0, -self.objective if goal == "max" else self.objective)

    def as_result(self, note: str) -> ProbeResult:
        return ProbeResult(
            probe=ESTIMATE_PROBE,
            ok=self.objective is not None,
            figures=dict(self.figures),
            notes=[note],
            error=self.reason,
        )


@dataclass(frozen=True)
class Verdict:
    """What the estimates decide for one stage: the launch order, the variants judged by estimate only, and
    a note per variant key (its predicted objective and place, or why it was not judged)."""

    launch: list[Variant]
    pruned: list[Variant]
    notes: dict[str, str]
    judged: int


def judge(exp: Experiment, variants: list[Variant], predictions: dict[str, Prediction]) -> Verdict:
    """Orders (and with `prune`, cuts) a stage's variants by the simulator's standing (`Prediction.standing`:
    the predicted objective, after any predicted SLO miss)."""
    spec, objective = exp.estimate, exp.resolved_objective()
    standings = {key: p.standing(objective.direction) for key, p in predictions.items()}
    launch, pruned = list(variants), list[Variant]()
    if spec.mode == "prune":
        launch, pruned = prune_by_estimate(variants, standings, spec.keep or len(variants))
    judged = sorted(
        (v for v in variants if not v.baseline and standings.get(v.key()) is not None),
        key=lambda v: standings[v.key()],  # type: ignore[arg-type, return-value]
    )
    place = {v.key(): i for i, v in enumerate(judged, 1)}
    dropped = {v.key() for v in pruned}
    notes = {}
    for variant in variants:
        p = predictions[variant.key()]
        if p.objective is None:
            notes[variant.key()] = f"not judged by the simulator: {p.reason}"
            continue
        where = f", #{place[variant.key()]} of {len(judged)}" if variant.key() in place else " (baseline)"
        note = f"predicted {objective.label} = {p.objective:.4g}{where} by the simulator"
        if p.misses_slos:
            note += f"; predicted to miss the SLOs by more than {SLO_MARGIN_PCT:g}%: {p.slo_text}"
        notes[variant.key()] = note + (f" (estimate.keep = {spec.keep})" if variant.key() in dropped else "")
    count = sum(1 for v in variants if standings.get(v.key()) is not None)
    return Verdict(order_by_estimate(launch, standings), pruned, notes, count)


Past = tuple[float, str, float, float]
"""How far one latency is past its SLO: (% of the bound, the SLO's key, the value, the bound)."""


def slo_excess(slos: Mapping[str, float], spec: ProbeSpec, result: ProbeResult) -> tuple[float, str] | None:
    """How far a simulated probe's latencies are past the latency SLOs, in % of the bound, where furthest, and
    that in words — judged as the ranking judges measured repeats (`rank.slo_failures`): a probe that judges the
    latency SLOs (the load curve) by its level that comes closest to meeting all of them, any other by the worst
    figure that declares each SLO's metric. None: no latency SLO, or no latency predicted."""
    bounds = {key: bound for key, bound in slos.items() if is_latency_slo(key) and bound > 0}
    if not bounds:
        return None

    def furthest(values: Mapping[str, float | None]) -> Past | None:
        past = [
            (100 * (value / bound - 1), key, value, bound)
            for key, bound in bounds.items()
            if (value := values.get(key)) is not None and math.isfinite(value)
        ]
        return max(past) if past else None

    if spec.judges_latency_slos:
        levels = [found for point in result.points if (found := furthest(point)) is not None]
        worst = min(levels) if levels else None
    else:
        declared: dict[str, float | None] = {}
        for key in bounds:
            metric = key.split("_")[0]
            values = [
                v
                for name, v in result.figures.items()
                if v is not None and (figure := spec.figure(name)) is not None and figure.slo == metric
            ]
            declared[key] = max(values) if values else None
        worst = furthest(declared)
    if worst is None:
        return None
    excess, key, value, bound = worst
    return excess, slo_miss(key, value, bound) or f"{key} {value:.4g} ≤ {bound:g}"


def load_calibration(path: str | None) -> CalibrationProfile | None:
    if path is None:
        return None
    from servetune.sim.profile import CalibrationProfile

    try:
        return CalibrationProfile.load(path)
    except (OSError, ValueError) as err:
        raise ServetuneError(
            f"estimate.calibration {path} cannot be read: {err}", "give a profile written by `servetune calibrate`"
        ) from None


Predictor = Callable[[EngineConfig], Prediction]


@dataclass(frozen=True)
class SimPredictor:
    """Predicts an experiment's objective for a config on the simulator: the objective's probe, with the
    experiment's parameters and SLOs, on its GPU (no GPU named: the device the calibration was fitted on)."""

    objective: Objective
    spec: ProbeSpec
    params: BaseModel
    slos: dict[str, float]
    gpu: str | None
    calibration: CalibrationProfile | None

    def __call__(self, config: EngineConfig) -> Prediction:
        if config.engine not in {"vllm", "sim"}:
            return Prediction({}, None, f"the simulator models vLLM only (engine {config.engine})")
        if config.engine == "vllm" and self.gpu is None:
            return Prediction({}, None, "no GPU named (hardware.gpu, or a calibration profile's device)")
        from servetune.sim.backend import SimBackend
        from servetune.sim.deployment import deployment_for_config

        try:
            backend = SimBackend(deployment_for_config(config, gpu=self.gpu, calibration=self.calibration))
            result = run_coroutine(run_probe(self.spec, ProbeContext(backend, slos=self.slos), self.params))
        except ServetuneError as err:
            return Prediction({}, None, err.problem)
        if not result.ok:
            return Prediction({}, None, result.error or "the simulated probe failed")
        probe, label = self.objective.probe, self.objective.label
        named = {f"{probe}.{k}": v for k, v in result.figures.items() if v is not None and math.isfinite(v)}
        value = named.get(label)
        past = slo_excess(self.slos, self.spec, result)
        return Prediction(
            named,
            value,
            None if value is not None else f"{self.objective.figure} was not predicted",
            slo_excess_pct=past[0] if past else None,
            slo_text=past[1] if past else "",
        )


def predictor(exp: Experiment) -> Predictor:
    """The experiment's predictor (its calibration profile read once)."""
    calibration = load_calibration(exp.estimate.calibration)
    objective = exp.resolved_objective()
    spec = get_probe(objective.probe)
    return SimPredictor(
        objective=objective,
        spec=spec,
        params=exp.suite.probes.params(objective.probe) or spec.params(),
        slos=dict(exp.slos),
        gpu=exp.hardware.gpu_arg() or (calibration.device if calibration else None),
        calibration=calibration,
    )
