"""Throughput against latency over a concurrency sweep, stopping at saturation; goodput = the highest request rate
(slo_output_tok_s: output rate) at a level whose percentiles meet every latency SLO."""

from __future__ import annotations

from pydantic import Field, field_validator

from servetune.load.saturation import SATURATION
from servetune.suite.probes._common import Params
from servetune.suite.requests import level_shape, load_point
from servetune.suite.result import ProbeResult
from servetune.suite.spec import TTFT_PARTS, Figure, ProbeContext, ProbeLoad, ProbeSpec, register


class LoadCurve(Params):
    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16], min_length=1)
    requests_per_point: int = Field(default=32, ge=1)
    input_tokens: int = Field(default=512, ge=1)
    output_tokens: int = Field(default=128, ge=1)
    stop_at_saturation: bool = Field(default=True, description="Stop when throughput stops rising (< 5% gain).")

    @field_validator("concurrency")
    @classmethod
    def _positive_increasing(cls, value: list[int]) -> list[int]:
        if any(c < 1 for c in value) or sorted(set(value)) != value:
            raise ValueError("concurrency must be positive and strictly increasing, e.g. [1, 2, 4, 8]")
        return value


def _levels(p: LoadCurve) -> list[tuple[int, int]]:
    """(concurrency, measured requests) of each level: at least two requests per stream."""
    return [(c, max(p.requests_per_point, 2 * c)) for c in p.concurrency]


def _loads(p: LoadCurve) -> list[ProbeLoad]:
    """Every level, as if none stopped at saturation (the most the curve can cost)."""
    sized_by = ("requests_per_point", "concurrency", "output_tokens")
    return [ProbeLoad(level_shape(c, n), p.output_tokens, sized_by) for c, n in _levels(p)]


async def run(ctx: ProbeContext, p: LoadCurve) -> ProbeResult:
    points: list[dict[str, float]] = []
    warnings: list[str] = []
    requests = failed = 0
    previous: float | None = None
    for concurrency, measured in _levels(p):
        level = await load_point(ctx, concurrency, measured, p.input_tokens, p.output_tokens)
        requests += level.requests
        failed += level.failed
        warnings += level.warnings
        point = {**level.point, "meets_slo": 0.0 if level.slo_failures else 1.0}
        points.append(point)
        throughput = point.get("output_tok_s", 0.0)
        if p.stop_at_saturation and SATURATION.closed_loop_saturated(previous, throughput) is not None:
            break
        previous = throughput if previous is None else max(previous, throughput)
    meeting = [pt for pt in points if pt["meets_slo"]]
    peak = max(points, key=lambda pt: pt.get("output_tok_s", 0.0)) if points else {}
    figures: dict[str, float | None] = {
        "goodput_rps": max((pt.get("request_rps", 0.0) for pt in meeting), default=0.0),
        "slo_output_tok_s": max((pt.get("output_tok_s", 0.0) for pt in meeting), default=0.0),
        "max_output_tok_s": peak.get("output_tok_s"),
        "saturation_concurrency": peak.get("concurrency"),
        "slo_max_concurrency": max((pt["concurrency"] for pt in meeting), default=0.0),
    }
    return ProbeResult(
        probe="load_curve",
        ok=bool(points) and failed < requests,
        figures=figures,
        points=points,
        requests=requests,
        failed_requests=failed,
        warnings=sorted(set(warnings)),
    )


def _latency_points() -> tuple[Figure, ...]:
    return tuple(
        Figure(name=f"{m}_{q}_ms", unit="ms", better="lower", scaling="time", label=f"{m.upper()} {q}")
        for m in ("ttft", "tpot", "itl", "e2el")
        for q in ("p50", "p90", "p95", "p99")
    )


SPEC = register(
    ProbeSpec(
        name="load_curve",
        order=80,
        params=LoadCurve,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(name="goodput_rps", unit="req/s", better="higher", scaling="rate", label="goodput", headline=True),
            Figure(
                name="slo_output_tok_s",
                unit="tok/s",
                better="higher",
                scaling="rate",
                label="output tok/s within the SLOs",
                headline=True,
            ),
            Figure(
                name="max_output_tok_s",
                unit="tok/s",
                better="higher",
                scaling="rate",
                label="peak output tok/s",
                headline=True,
            ),
            Figure(name="saturation_concurrency", unit="requests", better="none", label="saturation concurrency"),
            Figure(
                name="slo_max_concurrency",
                unit="requests",
                better="higher",
                label="highest concurrency within the SLOs",
            ),
        ),
        point_figures=(
            Figure(name="concurrency", unit="requests", better="none", label="concurrency"),
            Figure(name="request_rps", unit="req/s", better="higher", scaling="rate", label="requests/s"),
            Figure(name="output_tok_s", unit="tok/s", better="higher", scaling="rate", label="output tok/s"),
            Figure(name="goodput_request_rps", unit="req/s", better="higher", scaling="rate", label="goodput"),
            Figure(name="error_rate", unit="", better="lower", label="error rate"),
            Figure(name="meets_slo", unit="", better="higher", label="meets the SLOs"),
            *_latency_points(),
            *TTFT_PARTS,
        ),
        objectives={"goodput": "goodput_rps", "output_throughput": "slo_output_tok_s"},
        judges_latency_slos=True,
        loads=_loads,
    )
)
