"""B2: one stream generating N tokens (default 512, end of sequence ignored): tokens per second."""

from __future__ import annotations

from pydantic import Field

from servetune.suite.probes._common import Params, single_result, speed_figures, speed_values
from servetune.suite.requests import single, single_load
from servetune.suite.result import ProbeResult
from servetune.suite.spec import ProbeContext, ProbeSpec, register

SPEED_PROMPT_TOKENS = 64
"""The document each speed probe sends: short, so that the figures are decode."""


class DecodeSpeed(Params):
    output_tokens: int = Field(default=512, ge=2)


async def run(ctx: ProbeContext, p: DecodeSpeed) -> ProbeResult:
    reply = await single(ctx, prompt_tokens=SPEED_PROMPT_TOKENS, max_tokens=p.output_tokens, ignore_eos=True)
    figures, notes = speed_values(reply, p.output_tokens)
    return single_result("decode_speed", reply, figures, notes=notes)


SPEC = register(
    ProbeSpec(
        name="decode_speed",
        order=30,
        params=DecodeSpeed,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=speed_figures("decode, 1 stream,"),
        objectives={"decode_tok_s": "output_tok_s"},
        loads=lambda p: [single_load(p.output_tokens, "output_tokens")],
    )
)
