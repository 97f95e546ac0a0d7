"""B4: the same long system prompt twice with different questions: how much the second TTFT drops, and the
share of the second prompt the engine served from its prefix cache (its own counters; the system prompt is
unique to the run and the probe, so the first request is cold — the reconciliation proves it — and every hit
belongs to the second)."""

from __future__ import annotations

from pydantic import Field

from servetune.metrics.prometheus import delta
from servetune.suite.probes._common import Params
from servetune.suite.requests import PAIR, prefix_pair
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeLoad, ProbeSpec, register

QUESTION_TOKENS = 32
"""Length of each question after the shared system prompt."""


class PrefixReuse(Params):
    system_tokens: int = Field(default=4000, ge=16)
    max_tokens: int = Field(default=16, ge=1)


async def run(ctx: ProbeContext, p: PrefixReuse) -> ProbeResult:
    before = await ctx.backend.scrape()
    cold, warm = await prefix_pair(ctx, p.system_tokens, QUESTION_TOKENS, p.max_tokens)
    after = await ctx.backend.scrape()
    d = delta(before, after) if before is not None and after is not None else None
    ok = cold.ok and warm.ok
    hits = d.prefix_cache_hits if d is not None else None
    prompt = warm.prompt_tokens or p.system_tokens + QUESTION_TOKENS
    figures: dict[str, float | None] = {
        "ttft_cold_ms": cold.ttft_s * 1000,
        "ttft_warm_ms": warm.ttft_s * 1000,
        "ttft_drop_pct": 100 * (1 - warm.ttft_s / cold.ttft_s) if cold.ttft_s > 0 else None,
        "hit_rate_pct": 100 * hits / prompt if hits is not None else None,
    }
    notes = [] if hits is not None else ["the engine exposes no prefix-cache counters: judged by TTFT only"]
    return ProbeResult(
        probe="prefix_reuse",
        ok=ok,
        figures=figures if ok else {},
        requests=2,
        failed_requests=int(not cold.ok) + int(not warm.ok),
        warnings=sorted(set(cold.warnings + warm.warnings)),
        notes=notes,
        error=cold.error or warm.error,
    )


SPEC = register(
    ProbeSpec(
        name="prefix_reuse",
        order=50,
        params=PrefixReuse,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(name="ttft_cold_ms", unit="ms", better="lower", scaling="time", label="TTFT, cold prefix"),
            Figure(name="ttft_warm_ms", unit="ms", better="lower", scaling="time", label="TTFT, cached prefix"),
            Figure(
                name="ttft_drop_pct", unit="%", better="higher", label="TTFT drop with the prefix cached", headline=True
            ),
            Figure(name="hit_rate_pct", unit="%", better="higher", label="prefix-cache hit rate", headline=True),
        ),
        prompts="shared",
        loads=lambda p: [ProbeLoad(PAIR, p.max_tokens, ("max_tokens",))],
    )
)
