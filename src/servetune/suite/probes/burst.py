"""A burst: N requests arrive at once (a batch job, a retry storm); how long the server takes to drain them,
the worst wait for a first token, and how many it fails — what a queue in front of the engine must absorb."""

from __future__ import annotations

from pydantic import Field

from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.suite.probes._common import Params
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeLoad, ProbeSpec, register


class Burst(Params):
    requests: int = Field(default=64, ge=2, description="Requests sent at the same instant.")
    input_tokens: int = Field(default=256, ge=1)
    output_tokens: int = Field(default=64, ge=1)


def _shape(p: Burst) -> LoadShape:
    return LoadShape.open(float("inf"), requests=p.requests)


async def run(ctx: ProbeContext, p: Burst) -> ProbeResult:
    workload = Workload.synthetic(p.input_tokens, p.output_tokens, **ctx.seeds)
    result = await ctx.backend.run(workload, _shape(p))
    s = result.summary
    figures: dict[str, float | None] = {
        "drain_s": s.duration_s,
        "ttft_max_ms": s.ttft_ms.max,
        "ttft_p50_ms": s.ttft_ms.p50,
        "output_tok_s": s.output_throughput,
        "failed": float(s.failed),
    }
    return ProbeResult(
        probe="burst",
        ok=s.completed > 0,
        figures=figures,
        requests=s.completed + s.failed,
        failed_requests=s.failed,
        warnings=list(s.validity.warnings),
    )


SPEC = register(
    ProbeSpec(
        name="burst",
        order=75,
        params=Burst,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(name="drain_s", unit="s", better="lower", scaling="time", label="burst drain time", headline=True),
            Figure(name="ttft_max_ms", unit="ms", better="lower", scaling="time", label="burst worst TTFT"),
            Figure(name="ttft_p50_ms", unit="ms", better="lower", scaling="time", label="burst median TTFT"),
            Figure(name="output_tok_s", unit="tok/s", better="higher", scaling="rate", label="burst output tok/s"),
            Figure(name="failed", unit="requests", better="lower", label="burst failed requests"),
        ),
        objectives={"burst_drain": "drain_s"},
        loads=lambda p: [ProbeLoad(_shape(p), p.output_tokens, ("requests", "output_tokens"))],
    )
)
