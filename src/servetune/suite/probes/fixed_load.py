"""One fixed load: a closed loop of N streams, or Poisson arrivals at a fixed request rate; its throughput,
goodput (requests meeting per-request TTFT/TPOT/E2EL bounds, vLLM's `--goodput` rule) and latency percentiles.

The question a user asks at one operating point ("the highest output tok/s with 128 users under a TTFT p99 SLO",
"the most requests/s meeting both a TTFT and a TPOT bound at 10 req/s", "the lowest TPOT p50 at 4 req/s"), where
the load curve answers over a sweep. Its goodput bounds are the probe's own (`goodput:`), as they are an option of
`vllm bench serve` and not an SLO every run must meet; the experiment's `slos:` are judged on its percentiles."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from servetune.load.shape import LoadShape
from servetune.load.workload import Dist, Workload
from servetune.metrics.slo import Slos
from servetune.suite.probes._common import Params
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeLoad, ProbeSpec, register

DEFAULT_CONCURRENCY = 8


class FixedLoad(Params):
    concurrency: int | None = Field(
        default=None, ge=1, description="Closed loop: streams in flight (8 when neither it nor rate is given)."
    )
    rate: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="Poisson arrivals per second.")
    requests: int = Field(default=64, ge=1, description="Measured requests.")
    warmup_requests: int = Field(default=0, ge=0, description="Requests before the measured ones, excluded.")
    input_tokens: int = Field(default=512, ge=1)
    output_tokens: int = Field(default=128, ge=1)
    spread: float = Field(
        default=0.0, ge=0, lt=1, description="Lengths uniform within ± this fraction of input/output_tokens."
    )
    goodput: Slos | None = Field(
        default=None,
        description="Per-request bounds a request must meet to count in goodput_rps (`{ttft_ms: 1000, tpot_ms: "
        "60}`, vLLM's --goodput); without them goodput_rps is not reported.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_load(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("concurrency") is None and data.get("rate") is None:
            return {**data, "concurrency": DEFAULT_CONCURRENCY}
        return data

    @model_validator(mode="after")
    def _one_load(self) -> FixedLoad:
        if self.concurrency is not None and self.rate is not None:
            raise ValueError("give exactly one of concurrency (a closed loop) or rate (Poisson arrivals per second)")
        return self


def _length(tokens: int, spread: float) -> int | Dist:
    """A fixed length, or uniform within ± spread of it (the tuning table's request classes)."""
    if not spread:
        return tokens
    low = max(1, round(tokens * (1 - spread)))
    return Dist(kind="uniform", mean=tokens, std=spread * tokens / math.sqrt(3), min=low)


def shape_of(p: FixedLoad) -> LoadShape:
    """The load shape the parameters ask for (also what a replay table's probe is matched against)."""
    if p.concurrency is not None:
        return LoadShape.closed(p.concurrency, requests=p.requests, warmup_requests=p.warmup_requests)
    assert p.rate is not None
    return LoadShape.open(p.rate, requests=p.requests, warmup_requests=p.warmup_requests)


async def run(ctx: ProbeContext, p: FixedLoad) -> ProbeResult:
    workload = Workload.synthetic(_length(p.input_tokens, p.spread), _length(p.output_tokens, p.spread), **ctx.seeds)
    shape = shape_of(p).model_copy(update={"seed": ctx.seed})
    result = await ctx.backend.run(workload, shape, slos=p.goodput)
    s = result.summary
    figures: dict[str, float | None] = {
        "output_tok_s": s.output_throughput,
        "request_rps": s.request_throughput,
        "ttft_p50_ms": s.ttft_ms.p50,
        "ttft_p99_ms": s.ttft_ms.p99,
        "tpot_p50_ms": s.tpot_ms.p50,
        "tpot_p99_ms": s.tpot_ms.p99,
        "e2el_p50_ms": s.e2el_ms.p50,
        "e2el_p99_ms": s.e2el_ms.p99,
    }
    if p.goodput is not None:  # no bounds, no goodput: the figure is absent, not zero
        figures["goodput_rps"] = s.goodput
    return ProbeResult(
        probe="fixed_load",
        ok=s.completed > 0,
        figures=figures,
        requests=s.completed + s.failed,
        failed_requests=s.failed,
        warnings=list(s.validity.warnings),
    )


def _latency(metric: str, q: str, slo: bool) -> Figure:
    return Figure(
        name=f"{metric}_{q}_ms",
        unit="ms",
        better="lower",
        scaling="time",
        label=f"fixed-load {metric.upper()} {q}",
        slo=metric if slo else None,
    )


SPEC = register(
    ProbeSpec(
        name="fixed_load",
        order=78,
        params=FixedLoad,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(
                name="output_tok_s",
                unit="tok/s",
                better="higher",
                scaling="rate",
                label="fixed-load output tok/s",
                headline=True,
            ),
            Figure(name="request_rps", unit="req/s", better="higher", scaling="rate", label="fixed-load requests/s"),
            Figure(
                name="goodput_rps",
                unit="req/s",
                better="higher",
                scaling="rate",
                label="fixed-load goodput",
                headline=True,
            ),
            _latency("ttft", "p50", False),
            _latency("ttft", "p99", True),
            _latency("tpot", "p50", False),
            _latency("tpot", "p99", True),
            _latency("e2el", "p50", False),
            _latency("e2el", "p99", True),
        ),
        loads=lambda p: [
            ProbeLoad(
                shape_of(p),
                math.ceil(p.output_tokens * (1 + p.spread)),
                ("requests", "warmup_requests", "output_tokens"),
            )
        ],
    )
)
