"""The seeds' acceptance test: `/v1/models` lists the model (and says its max_model_len), a short chat answers, a
long-context request completes (default: half of max_model_len). `servetune check` runs this probe."""

from __future__ import annotations

from pydantic import Field

from servetune.suite.probes._common import OUTPUT_MARGIN, Params
from servetune.suite.requests import single, single_load
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeSpec, register

CHAT_PROMPT = "Say hello in five words."
LONG_CONTEXT_MAX_TOKENS = 8
"""Output tokens asked of the long-context request: enough to prove decoding after a long prefill."""


class Acceptance(Params):
    long_context_tokens: int | None = Field(default=None, ge=16, description="Default: half of max_model_len.")
    chat_max_tokens: int = Field(default=16, ge=1)


async def run(ctx: ProbeContext, p: Acceptance) -> ProbeResult:
    steps: list[str] = []
    models = await ctx.backend.models()
    entry = models.find(ctx.backend.model) if models else None
    listed = entry is not None
    limit = (entry.max_model_len if entry else None) or ctx.max_model_len
    if models is None:
        steps.append("FAIL models: /v1/models cannot be read")
    elif entry is None:
        steps.append(f"FAIL models: {ctx.backend.model!r} is not served; the server lists {list(models.names)}")
    else:
        steps.append(f"PASS models: serves {ctx.backend.model!r}" + (f", max_model_len={limit}" if limit else ""))
    chat = await single(ctx, prompt=CHAT_PROMPT, max_tokens=p.chat_max_tokens, ignore_eos=False)
    chat_ok = chat.ok and chat.output_tokens > 0
    steps.append(
        f"PASS short chat: {chat.output_tokens} tokens in {chat.e2el_s:.3f} s"
        if chat_ok
        else f"FAIL short chat: {chat.error or 'an empty answer'}"
    )
    wanted = p.long_context_tokens or max(16, (limit or 2048) // 2)
    length = wanted
    if limit and wanted + LONG_CONTEXT_MAX_TOKENS > limit:
        length = max(16, limit - LONG_CONTEXT_MAX_TOKENS - OUTPUT_MARGIN)
        steps.append(f"NOTE long context: {wanted} tokens do not fit max_model_len={limit}; sent {length}")
    long = await single(ctx, prompt_tokens=length, max_tokens=LONG_CONTEXT_MAX_TOKENS, ignore_eos=True)
    reached = long.prompt_tokens
    long_ok = long.ok and (reached is None or reached >= 0.9 * length)
    if long_ok:
        steps.append(f"PASS long context: {reached or length} prompt tokens, {long.output_tokens} output tokens")
    elif long.ok:
        steps.append(f"FAIL long context: only {reached} prompt tokens reached the model (asked {length})")
    else:
        steps.append(f"FAIL long context ({length} tokens): {long.error}")
    passed = listed and chat_ok and long_ok
    figures: dict[str, float | None] = {
        "passed": 1.0 if passed else 0.0,
        "model_listed": 1.0 if listed else 0.0,
        "chat_s": chat.e2el_s if chat.ok else None,
        "long_context_s": long.e2el_s if long.ok else None,
        "long_context_tokens": float(reached or length),
        "max_model_len": float(limit) if limit else None,
    }
    return ProbeResult(
        probe="acceptance",
        ok=True,
        figures=figures,
        requests=2,
        failed_requests=int(not chat.ok) + int(not long.ok),
        error="; ".join(e for e in (chat.error, long.error) if e) or None,
        notes=steps,
        warnings=sorted(set(chat.warnings + long.warnings)),
    )


SPEC = register(
    ProbeSpec(
        name="acceptance",
        order=10,
        params=Acceptance,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(name="passed", unit="", better="higher", label="acceptance passed", headline=True),
            Figure(name="model_listed", unit="", better="higher", label="model listed"),
            Figure(name="chat_s", unit="s", better="lower", scaling="time", label="short chat"),
            Figure(name="long_context_s", unit="s", better="lower", scaling="time", label="long-context request"),
            Figure(name="long_context_tokens", unit="tokens", better="none", label="long-context prompt"),
            Figure(name="max_model_len", unit="tokens", better="none", label="max_model_len served"),
        ),
        loads=lambda p: [single_load(p.chat_max_tokens, "chat_max_tokens"), single_load(LONG_CONTEXT_MAX_TOKENS)],
    )
)
