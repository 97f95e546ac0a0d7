"""Judging variants before launching any: the simulator (`servetune.sim.estimate`) predicts the objective's
probe on each vLLM/sim variant, on the workload that probe sends, so the runner can launch the predicted best
first (`estimate.mode: order`) or launch only the best few (`prune`).

Predictions are stored like a probe run named `estimate` (figures `<probe>.<figure>`, e.g.
`decode_speed.output_tok_s`), next to the measured ones: the report shows predicted and measured side by side,
and a pruned variant keeps its predicted figures.  Only the objective's probe is simulated; the acceptance,
prefix-reuse and memory-headroom probes are not predictable this way (the loader rejects them as objectives).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.suite.params import DecodeSpeed, LoadCurve, LongGeneration, LongPrefill, ShortLatency
from servetune.suite.result import ProbeResult
from servetune.tune.experiment import SLO_LATENCY_KEY, Experiment
from servetune.tune.order import order_by_estimate, prune_by_estimate
from servetune.tune.variants import Variant

if TYPE_CHECKING:
    from servetune.sim.deployment import SimDeployment
    from servetune.sim.estimate import EstimateResult
    from servetune.sim.profile import CalibrationProfile

ESTIMATE_PROBE = "estimate"
"""The store's probe name for the simulator's predictions of a variant."""
SPEED_PROMPT_TOKENS = 64
"""Prompt length of the suite's speed probes (decode_speed, long_generation send a 64-token document)."""
CHAT_OVERHEAD_TOKENS = 10
"""Tokens a chat template adds around a short message (short_latency's prompt is text, not token ids)."""
OUTPUT_MARGIN = 64
"""As the long_prefill probe: tokens kept free under max_model_len for the answer."""

ESTIMABLE: dict[str, tuple[str, ...]] = {
    "short_latency": ("e2el_ms", "ttft_ms"),
    "decode_speed": ("output_tok_s", "decode_tok_s", "tpot_ms", "ttft_ms", "e2el_ms"),
    "long_generation": ("output_tok_s", "decode_tok_s", "tpot_ms", "ttft_ms", "e2el_ms"),
    "long_prefill": ("ttft_s", "e2el_s", "prefill_tok_s"),
    "load_curve": ("goodput_rps", "slo_output_tok_s", "max_output_tok_s", "saturation_concurrency"),
}
"""Probe figures the simulator predicts (vLLM's definitions, as the probes measure them)."""


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
    scores = {key: p.objective for key, p in predictions.items()}
    launch, pruned = list(variants), []
    if spec.mode == "prune":
        launch, pruned = prune_by_estimate(variants, scores, objective.goal, spec.keep or len(variants))
    sign = 1.0 if objective.goal == "max" else -1.0
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
        note = f"predicted {objective.probe}.{objective.figure} = {p.objective:.4g}{where} by the simulator"
        notes[variant.key()] = note + (f" (estimate.keep = {spec.keep})" if variant.key() in dropped else "")
    count = sum(1 for v in variants if scores.get(v.key()) is not None)
    return Verdict(order_by_estimate(launch, scores, objective.goal), pruned, notes, count)


def estimable(exp: Experiment) -> bool:
    objective = exp.resolved_objective()
    return objective.figure in ESTIMABLE.get(objective.probe, ())


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


def predictor(exp: Experiment) -> Predictor:
    """Predicts the experiment's objective for a config (the calibration profile is read once)."""
    calibration = load_calibration(exp.estimate.calibration)
    objective = exp.resolved_objective()
    params = getattr(exp.suite.probes, objective.probe, None) or _default_params(objective.probe)

    def predict(config: EngineConfig) -> Prediction:
        gpu = exp.hardware.gpu if exp.hardware.gpu else None
        if config.engine not in {"vllm", "sim"}:
            return Prediction({}, None, f"the simulator models vLLM only (engine {config.engine})")
        if config.engine == "vllm" and gpu is None:
            return Prediction({}, None, "no GPU named (hardware.gpu)")
        from servetune.sim.estimate import deployment_for_config

        try:
            dep = deployment_for_config(config, gpu=gpu, calibration=calibration)
            figures = simulate_probe(dep, objective.probe, params, exp.slos)
        except ServetuneError as err:
            return Prediction({}, None, err.problem)
        named = {f"{objective.probe}.{k}": v for k, v in figures.items() if math.isfinite(v)}
        value = named.get(f"{objective.probe}.{objective.figure}")
        return Prediction(named, value, None if value is not None else f"{objective.figure} was not predicted")

    return predict


def _default_params(probe: str) -> Any:
    return {
        "short_latency": ShortLatency,
        "decode_speed": DecodeSpeed,
        "long_generation": LongGeneration,
        "long_prefill": LongPrefill,
        "load_curve": LoadCurve,
    }[probe]()


def simulate_probe(dep: SimDeployment, probe: str, params: Any, slos: dict[str, float]) -> dict[str, float]:
    """The figures `probe` would measure on the simulated deployment (simulated time, vLLM's definitions)."""
    if probe == "load_curve":
        return _load_curve(dep, params, slos)
    if probe == "short_latency":
        prompt, output = len(params.prompt) // 4 + CHAT_OVERHEAD_TOKENS, params.max_tokens
    elif probe == "long_prefill":
        output = params.max_tokens
        prompt = min(params.prompt_tokens, max(16, dep.limits.max_model_len - output - OUTPUT_MARGIN))
    else:
        prompt, output = SPEED_PROMPT_TOKENS, params.output_tokens
    r = _run(dep, prompt, output, concurrency=1, requests=1)
    e2el_s, ttft_s = r.e2el_ms.mean / 1000, r.ttft_ms.mean / 1000
    if probe == "long_prefill":
        return {"ttft_s": ttft_s, "e2el_s": e2el_s, "prefill_tok_s": prompt / ttft_s}
    if probe == "short_latency":
        return {"e2el_ms": r.e2el_ms.mean, "ttft_ms": r.ttft_ms.mean}
    return {
        "output_tok_s": output / e2el_s,
        "decode_tok_s": 1000 / r.tpot_ms.mean,
        "tpot_ms": r.tpot_ms.mean,
        "ttft_ms": r.ttft_ms.mean,
        "e2el_ms": r.e2el_ms.mean,
    }


def _run(dep: SimDeployment, prompt: int, output: int, *, concurrency: int, requests: int) -> EstimateResult:
    from servetune.sim.estimate import SimWorkload, estimate

    workload = SimWorkload(num_requests=requests, input_len=prompt, output_len=output, concurrency=concurrency)
    return estimate(dep, workload)


def _load_curve(dep: SimDeployment, p: LoadCurve, slos: dict[str, float]) -> dict[str, float]:
    """The load curve's sweep on the simulator, with the probe's saturation stop and goodput rule (a level
    meets the SLOs when its percentiles do; the simulator gives p50/p90/p99, p95 is judged on p99)."""
    from servetune.suite.probes import SATURATION_GAIN

    points: list[dict[str, float]] = []
    best = 0.0
    for concurrency in p.concurrency:
        r = _run(
            dep,
            p.input_tokens,
            p.output_tokens,
            concurrency=concurrency,
            requests=max(p.requests_per_point, 2 * concurrency),
        )
        point = {
            "concurrency": float(concurrency),
            "request_rps": r.request_throughput,
            "output_tok_s": r.output_throughput,
        }
        for name in ("ttft", "tpot", "itl", "e2el"):
            dist = getattr(r, f"{name}_ms")
            point |= {
                f"{name}_p50_ms": dist.p50,
                f"{name}_p90_ms": dist.p90,
                f"{name}_p95_ms": dist.p99,
                f"{name}_p99_ms": dist.p99,
            }
        point["meets_slo"] = float(all(point.get(k, 0.0) <= v for k, v in slos.items() if SLO_LATENCY_KEY.match(k)))
        points.append(point)
        if p.stop_at_saturation and best > 0 and point["output_tok_s"] < best * (1 + SATURATION_GAIN):
            break
        best = max(best, point["output_tok_s"])
    meeting = [pt for pt in points if pt["meets_slo"]]
    peak = max(points, key=lambda pt: pt["output_tok_s"])
    return {
        "goodput_rps": max((pt["request_rps"] for pt in meeting), default=0.0),
        "slo_output_tok_s": max((pt["output_tok_s"] for pt in meeting), default=0.0),
        "max_output_tok_s": peak["output_tok_s"],
        "saturation_concurrency": peak["concurrency"],
    }
