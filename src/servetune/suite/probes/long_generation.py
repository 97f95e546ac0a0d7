"""B6: one stream generating 2048 tokens, where speculative decoding shows; with the engine's draft
acceptance counters."""

from __future__ import annotations

from pydantic import Field

from servetune.metrics.prometheus import delta
from servetune.suite.probes._common import Params, single_result, speed_figures, speed_values
from servetune.suite.probes.decode_speed import SPEED_PROMPT_TOKENS
from servetune.suite.requests import single, single_load
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeSpec, register


class LongGeneration(Params):
    output_tokens: int = Field(default=2048, ge=2)


async def run(ctx: ProbeContext, p: LongGeneration) -> ProbeResult:
    before = await ctx.backend.scrape()
    reply = await single(ctx, prompt_tokens=SPEED_PROMPT_TOKENS, max_tokens=p.output_tokens, ignore_eos=True)
    after = await ctx.backend.scrape()
    figures, notes = speed_values(reply, p.output_tokens)
    d = delta(before, after) if before is not None and after is not None else None
    if d is not None and d.spec_acceptance_rate is not None:
        figures["spec_acceptance_pct"] = 100 * d.spec_acceptance_rate
        figures["spec_mean_accept_len"] = d.spec_mean_acceptance_length
    else:
        notes.append("no speculative-decoding counters moved (spec decode off, or the engine exposes none)")
    return single_result("long_generation", reply, figures, notes=notes)


SPEC = register(
    ProbeSpec(
        name="long_generation",
        order=70,
        params=LongGeneration,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            *speed_figures("long generation"),
            Figure(name="spec_acceptance_pct", unit="%", better="higher", label="draft acceptance", headline=True),
            Figure(name="spec_mean_accept_len", unit="tokens", better="higher", label="mean acceptance length"),
        ),
        objectives={"long_generation_tok_s": "output_tok_s"},
        loads=lambda p: [single_load(p.output_tokens, "output_tokens")],
    )
)
