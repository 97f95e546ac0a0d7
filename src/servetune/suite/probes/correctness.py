"""Greedy answers to a few fixed prompts, kept whole (tokens and their log-probabilities), so that a config whose
knobs change what the model computes (KV-cache dtype, quantization, speculative decoding, another model file) can
be compared with the baseline's answers: the correctness gate (`tune.results.correctness`). The prompts are the
same on every variant and repeat, on purpose: the comparison is of answers to one question."""

from __future__ import annotations

from pydantic import Field

from servetune.load.shape import LoadShape
from servetune.suite.probes._common import Params
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeLoad, ProbeSpec, register

PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Water boils at a temperature of",
    "Once upon a time, in a small village by the sea,",
)

OUTPUT_FLAGS = (
    "kv-cache-dtype",
    "quantization",
    "speculative-config",
    "dtype",
    "cache-type-k",
    "cache-type-v",
    "model",
)
"""The knobs that change outputs: the probe runs on the baseline and on the variants that change one."""


class Correctness(Params):
    prompts: list[str] = Field(default_factory=lambda: list(PROMPTS), min_length=1, max_length=256)
    max_tokens: int = Field(default=32, ge=1, le=4096)
    max_loss_pct: float = Field(
        default=0.0,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="How far below the baseline's agreement with itself a variant's agreement with the baseline "
        "may fall (percentage points) and still pass.",
    )
    only_when_changed: list[str] = Field(
        default_factory=lambda: list(OUTPUT_FLAGS),
        description="Run only on the baseline and on variants that change one of these (the knobs that change "
        "outputs).",
    )


async def run(ctx: ProbeContext, p: Correctness) -> ProbeResult:
    samples = []
    for prompt in p.prompts:
        answer = await ctx.backend.greedy(prompt, p.max_tokens)
        if answer is None:
            return ProbeResult(
                probe="correctness",
                ok=False,
                error="this backend generates no text (the simulator): the correctness gate needs a real engine",
            )
        samples.append(answer)
    failed = [s for s in samples if s.error]
    tokens = sum(len(s.tokens) for s in samples if not s.error)
    first = [s.logprobs[0] for s in samples if s.logprobs and s.logprobs[0] is not None]
    return ProbeResult(
        probe="correctness",
        ok=not failed,
        figures={
            "generated_tokens": float(tokens),
            "first_token_logprob": sum(first) / len(first) if first else None,
        },
        samples=samples,
        requests=len(samples),
        failed_requests=len(failed),
        error="; ".join(s.error or "" for s in failed) or None,
    )


SPEC = register(
    ProbeSpec(
        name="correctness",
        order=15,
        params=Correctness,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(name="generated_tokens", unit="tokens", better="none", label="greedy tokens generated"),
            Figure(name="first_token_logprob", unit="", better="none", label="first greedy token log-prob"),
        ),
        simulable=False,
        prompts="given",
        loads=lambda p: [
            ProbeLoad(LoadShape.closed(1, requests=len(p.prompts)), p.max_tokens, ("prompts", "max_tokens"))
        ],
    )
)
