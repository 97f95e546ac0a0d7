"""B1: one short chat request (seed 001: "你好", max 32 tokens): end-to-end time."""

from __future__ import annotations

from pydantic import Field

from servetune.suite.probes._common import Params, single_result
from servetune.suite.requests import single, single_load
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeSpec, register


class ShortLatency(Params):
    prompt: str = "Hello"
    max_tokens: int = Field(default=32, ge=1)


async def run(ctx: ProbeContext, p: ShortLatency) -> ProbeResult:
    reply = await single(ctx, prompt=p.prompt, max_tokens=p.max_tokens, ignore_eos=False)
    figures: dict[str, float | None] = {
        "e2el_ms": reply.e2el_s * 1000,
        "ttft_ms": reply.ttft_s * 1000,
        "output_tokens": float(reply.output_tokens),
    }
    return single_result("short_latency", reply, figures)


SPEC = register(
    ProbeSpec(
        name="short_latency",
        order=20,
        params=ShortLatency,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(
                name="e2el_ms",
                unit="ms",
                better="lower",
                scaling="time",
                label="short chat E2EL",
                headline=True,
                slo="e2el",
            ),
            Figure(name="ttft_ms", unit="ms", better="lower", scaling="time", label="short chat TTFT", slo="ttft"),
            Figure(name="output_tokens", unit="tokens", better="none", label="output tokens"),
        ),
        objectives={"latency": "e2el_ms"},
        prompts="given",
        loads=lambda p: [single_load(p.max_tokens, "max_tokens")],
    )
)
