"""B3: one long document (default ≈24k tokens, capped to fit max_model_len): time to first token."""

from __future__ import annotations

from pydantic import Field

from servetune.suite.probes._common import OUTPUT_MARGIN, Params, single_result
from servetune.suite.requests import single, single_load
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeSpec, register


class LongPrefill(Params):
    prompt_tokens: int = Field(default=24000, ge=16, description="Capped at max_model_len minus the output.")
    max_tokens: int = Field(default=16, ge=1)


async def run(ctx: ProbeContext, p: LongPrefill) -> ProbeResult:
    tokens = p.prompt_tokens
    notes = []
    limit = ctx.max_model_len
    if limit and tokens > limit - p.max_tokens - OUTPUT_MARGIN:
        tokens = max(16, limit - p.max_tokens - OUTPUT_MARGIN)
        notes.append(f"prompt capped from {p.prompt_tokens} to {tokens} tokens to fit max_model_len {limit}")
    reply = await single(ctx, prompt_tokens=tokens, max_tokens=p.max_tokens, ignore_eos=True)
    prompt = reply.prompt_tokens or tokens
    figures: dict[str, float | None] = {
        "ttft_s": reply.ttft_s,
        "e2el_s": reply.e2el_s,
        "prompt_tokens": float(prompt),
        "prefill_tok_s": prompt / reply.ttft_s if reply.ttft_s > 0 else None,
    }
    return single_result("long_prefill", reply, figures, notes=notes)


SPEC = register(
    ProbeSpec(
        name="long_prefill",
        order=40,
        params=LongPrefill,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(name="ttft_s", unit="s", better="lower", scaling="time", label="long prefill TTFT", headline=True),
            Figure(name="e2el_s", unit="s", better="lower", scaling="time", label="long prefill E2EL"),
            Figure(name="prompt_tokens", unit="tokens", better="none", label="prompt tokens"),
            Figure(name="prefill_tok_s", unit="tok/s", better="higher", scaling="rate", label="prefill tok/s"),
        ),
        objectives={"prefill_s": "ttft_s"},
        loads=lambda p: [single_load(p.max_tokens, "max_tokens")],
    )
)
