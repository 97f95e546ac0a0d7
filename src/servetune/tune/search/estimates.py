"""Judging variants before launching any: the objective's probe — the very `ProbeSpec` the suite runs — is run
on the simulator (`servetune.sim.backend.SimBackend`) for each vLLM/sim variant, so the loop can launch the
predicted best first (`estimate.mode: order`) or launch only the best few (`prune`).

Predictions are stored like a probe run named `estimate` (figures `<probe>.<figure>`, e.g.
`decode_speed.output_tok_s`), next to the measured ones: the report shows predicted and measured side by side,
and a pruned variant keeps its predicted figures. A probe the simulator cannot run (`simulable=False`, e.g.
memory headroom) cannot be an estimated objective (the loader rejects it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.process.interrupts import run_coroutine
from servetune.suite.registry import get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext, ProbeSpec
from servetune.tune.schema.experiment import Experiment, Objective
from servetune.tune.schema.variants import Variant
from servetune.tune.search.order import order_by_estimate, prune_by_estimate

if TYPE_CHECKING:
    from servetune.sim.profile import CalibrationProfile

ESTIMATE_PROBE = "estimate"
"""The store's probe name for the simulator's predictions of a variant."""


@dataclass(frozen=True)
class Prediction:
    """One variant's predicted figures (`<probe>.<figure>`), or why it could not be judged."""

    figures: dict[str, float]
    objective: float | None
    reason: str | None = None

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
    """Orders (and with `prune`, cuts) a stage's variants by their predicted objective."""
    spec, objective = exp.estimate, exp.resolved_objective()
    goal = objective.direction
    scores = {key: p.objective for key, p in predictions.items()}
    launch, pruned = list(variants), list[Variant]()
    if spec.mode == "prune":
        launch, pruned = prune_by_estimate(variants, scores, goal, spec.keep or len(variants))
    sign = 1.0 if goal == "max" else -1.0
    judged = sorted(
        (v for v in variants if not v.baseline and scores.get(v.key()) is not None),
        key=lambda v: -sign * scores[v.key()],  # type: ignore[operator]
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
        notes[variant.key()] = note + (f" (estimate.keep = {spec.keep})" if variant.key() in dropped else "")
    count = sum(1 for v in variants if scores.get(v.key()) is not None)
    return Verdict(order_by_estimate(launch, scores, goal), pruned, notes, count)


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
        return Prediction(named, value, None if value is not None else f"{self.objective.figure} was not predicted")


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
