"""servetune's figures against the engine's own account of the same interval.

A probe's figures are computed from what the client saw (usage, chunk times). The engine counts the same work
itself: the prompt tokens it was given, how many of them it served from its prefix cache instead of computing,
the tokens it generated, the requests it finished. When the two disagree the figure measures something other
than it claims — a "prefill" whose prompt the engine mostly had cached, requests the client never saw — and
the run is not valid for comparisons. The rules (docs/metrics.md, "Reconciliation"):

- each engine's counters mean different things, read here once per dialect: vLLM and the simulator count every
  prompt token (`vllm:prompt_tokens_total`) and the cached ones apart (`vllm:prefix_cache_hits_total`, plus a
  KV connector's `vllm:external_prefix_cache_hits_total`); SGLang likewise (`sglang:cached_tokens_total`);
  llama.cpp counts the tokens it evaluated (`llamacpp:prompt_tokens_total`) and the cached ones apart
  (`llamacpp:prompt_tokens_cached_total`);
- llama.cpp also accounts for every request in its answer (`timings`: `prompt_n` evaluated, `cache_n` served from
  its cache, `predicted_n` generated; `RequestRecord.engine_timings`): where the engine has no `/metrics` (llama.cpp
  without `--metrics`, its default) and every completed request carries them, their sums are the engine's account
  (`timings_account`), held to the same rules;
- prompt and output tokens agree within one token per request, finished requests exactly (compared only when
  every request completed: a failed one may have been counted by the engine, or not);
- a cold prompt may find at most `COLD_OPENING_TOKENS` per request in the cache (the chat template's opening,
  a first word drawn alike); a probe that shares prefixes on purpose keeps its first request cold: the cache
  may then serve at most the prompts of the requests after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from servetune.metrics.prometheus import MetricsSnapshot
from servetune.metrics.record import RequestRecord

Prompts = Literal["cold", "shared", "given"]
"""What a probe's prompts must be: `cold` (new to the engine: a prefill is a prefill), `shared` (the first
request cold, later ones reuse its prefix on purpose), `given` (texts the user chose, sent again on every
repeat: a cache hit is theirs to expect)."""

Dialect = Literal["vllm", "sglang", "llamacpp"]

COLD_OPENING_TOKENS = 32
"""Cached tokens a cold prompt may still hit, per request: the chat template's opening (a default system
prompt is rounded down to whole cache blocks by vLLM) and, on llama.cpp's token-level cache, a first word that
happens to repeat the slot's previous prompt."""
TOKENS_PER_REQUEST = 1
"""Prompt and output token totals may differ from the engine's by this much per request."""


class ClientAccount(BaseModel):
    """What servetune sent and saw over the interval: every request of the probe, warm-up phases included (the
    engine counted those too)."""

    model_config = ConfigDict(frozen=True)

    requests: int
    completed: int
    prompt_tokens: int | None
    """Σ usage.prompt_tokens of the completed requests (None: some answer carried no usage)."""
    output_tokens: int | None
    """Σ usage.completion_tokens of the completed requests (None: some answer carried no usage)."""
    later_prompt_tokens: int | None
    """Σ prompt tokens of the completed requests after the first sent: what a `shared` probe may find cached."""

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> ClientAccount:
        done = sorted((r for r in records if r.ok), key=lambda r: (r.sent_ns, r.index, r.turn))
        prompts = [r.prompt_tokens for r in done]
        outputs = [r.usage_output_tokens for r in done]
        known = all(p is not None for p in prompts)
        return cls(
            requests=len(records),
            completed=len(done),
            prompt_tokens=sum(p or 0 for p in prompts) if known else None,
            output_tokens=sum(o or 0 for o in outputs) if all(o is not None for o in outputs) else None,
            later_prompt_tokens=sum(p or 0 for p in prompts[1:]) if known else None,
        )


class EngineAccount(BaseModel):
    """What the engine's own counters say happened between two scrapes (None: it does not count that)."""

    model_config = ConfigDict(frozen=True)

    dialect: Dialect
    source: Literal["metrics", "timings"] = "metrics"
    """Where the account comes from: the engine's /metrics counters, or its per-response timings."""
    prompt_tokens: float | None
    """Every prompt token of the requests it prefilled, cached ones included."""
    cached_tokens: float | None
    """Of them, the tokens its prefix cache served."""
    evaluated_tokens: float | None
    """Of them, the tokens it computed."""
    output_tokens: float | None
    requests: float | None
    preemptions: float | None


def _dialect(snap: MetricsSnapshot) -> Dialect | None:
    names = snap.names()
    dialects: tuple[Dialect, ...] = ("vllm", "sglang", "llamacpp")
    return next((d for d in dialects if f"{d}:prompt_tokens_total" in names), None)


def engine_account(before: MetricsSnapshot, after: MetricsSnapshot) -> EngineAccount | None:
    """The engine's account of the interval between two scrapes, in its dialect (None: it keeps no prompt
    token counter, or it went backwards: the engine restarted)."""
    dialect = _dialect(after)
    if dialect is None or _dialect(before) != dialect:
        return None

    def diff(*names: str, absent_is_zero: bool = False) -> float | None:
        total = 0.0
        for name in names:
            a, b = before.values(name), after.values(name)
            if not b and not absent_is_zero:
                return None
            change = sum(b) - sum(a)
            if change < 0:
                return None
            total += change
        return total

    if dialect == "llamacpp":
        evaluated = diff("llamacpp:prompt_tokens_total")
        if evaluated is None:
            return None
        cached = diff("llamacpp:prompt_tokens_cached_total")
        prompt = evaluated + cached if evaluated is not None and cached is not None else None
        return EngineAccount(
            dialect=dialect,
            prompt_tokens=prompt,
            cached_tokens=cached,
            evaluated_tokens=evaluated,
            output_tokens=diff("llamacpp:tokens_predicted_total"),
            requests=None,
            preemptions=None,
        )
    if dialect == "sglang":
        prompt = diff("sglang:prompt_tokens_total")
        # SGLang creates its cached-token counter at the first hit: absent means none yet.
        cached = diff("sglang:cached_tokens_total", absent_is_zero=True)
        requests = diff("sglang:num_requests_total")
        preemptions = diff("sglang:num_retracted_requests_total")
        output = diff("sglang:generation_tokens_total")
    else:
        prompt = diff("vllm:prompt_tokens_total")
        cached = diff("vllm:prefix_cache_hits_total")
        external = diff("vllm:external_prefix_cache_hits_total")
        if cached is not None and external is not None:
            cached += external
        requests = diff("vllm:request_success_total")
        preemptions = diff("vllm:num_preemptions_total")
        output = diff("vllm:generation_tokens_total")
    if prompt is None:
        return None
    evaluated = prompt - cached if cached is not None else None
    return EngineAccount(
        dialect=dialect,
        prompt_tokens=prompt,
        cached_tokens=cached,
        evaluated_tokens=evaluated,
        output_tokens=output,
        requests=requests,
        preemptions=preemptions,
    )


def timings_account(records: Sequence[RequestRecord]) -> EngineAccount | None:
    """The engine's account from its per-response timings (llama.cpp's), when every completed request carries
    them (None otherwise: the engine sends none, or some answer lacked them)."""
    done = [r.engine_timings for r in records if r.ok]
    if not done or any(t is None for t in done):
        return None
    timings = [t for t in done if t is not None]
    evaluated = float(sum(t.prompt_n for t in timings))
    cached = float(sum(t.cache_n for t in timings))
    return EngineAccount(
        dialect="llamacpp",
        source="timings",
        prompt_tokens=evaluated + cached,
        cached_tokens=cached,
        evaluated_tokens=evaluated,
        output_tokens=float(sum(t.predicted_n for t in timings)),
        requests=None,
        preemptions=None,
    )


class Check(BaseModel):
    """One figure of servetune's beside the engine's count of the same thing."""

    model_config = ConfigDict(frozen=True)

    name: Literal["prompt_tokens", "output_tokens", "requests", "cached_tokens"]
    servetune: float
    """servetune's figure (for `cached_tokens`: the most the prompts allow)."""
    engine: float
    tolerance: float
    agrees: bool
    message: str


class Reconciliation(BaseModel):
    """Every check of one probe run, and what could not be checked."""

    model_config = ConfigDict(frozen=True)

    dialect: Dialect | None
    source: Literal["metrics", "timings"] | None = None
    """The engine's account it was checked against: /metrics counters or per-response timings (None: none)."""
    checks: list[Check]
    notes: list[str]
    evaluated_tokens: float | None = None
    """The prompt tokens the engine computed (not served from its cache) over the run."""

    @property
    def flagged(self) -> list[Check]:
        return [c for c in self.checks if not c.agrees]


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _total(name: Literal["prompt_tokens", "output_tokens"], ours: int, theirs: float, requests: int) -> Check:
    tolerance = float(TOKENS_PER_REQUEST * max(1, requests))
    what = "prompt" if name == "prompt_tokens" else "output"
    agrees = abs(theirs - ours) <= tolerance
    message = f"{what} tokens: servetune counted {_n(ours)}, the engine {_n(theirs)}" + (
        "" if agrees else f" (more apart than ±{_n(tolerance)}: the figures do not describe the work it did)"
    )
    return Check(name=name, servetune=float(ours), engine=theirs, tolerance=tolerance, agrees=agrees, message=message)


def _cached(client: ClientAccount, engine: EngineAccount, prompts: Prompts) -> Check | None:
    cached = engine.cached_tokens
    if cached is None and engine.evaluated_tokens is not None and client.prompt_tokens is not None:
        cached = max(0.0, client.prompt_tokens - engine.evaluated_tokens)
    if cached is None or (prompts == "shared" and client.later_prompt_tokens is None):
        return None
    allowed = float(COLD_OPENING_TOKENS * max(1, client.requests))
    if prompts == "shared":
        allowed += client.later_prompt_tokens or 0
    agrees = cached <= allowed
    prompt = engine.prompt_tokens if engine.prompt_tokens is not None else client.prompt_tokens
    of = f" of {_n(prompt)}" if prompt is not None else ""
    if agrees:
        message = f"cached prompt tokens: {_n(cached)}{of} (at most {_n(allowed)} allowed)"
    elif prompts == "shared":
        message = (
            f"the first request was not cold: the engine served {_n(cached)}{of} prompt tokens from its cache, more "
            f"than the {_n(allowed)} its later requests could reuse — an earlier request of the run shared its prefix"
        )
    else:
        message = (
            f"warm prefill: the engine served {_n(cached)}{of} prompt tokens from its cache (evaluated "
            f"{_n(prompt - cached) if prompt is not None else '?'}; a cold prompt may hit at most {_n(allowed)}): "
            "the figures time a cache hit, not a prefill"
        )
    return Check(
        name="cached_tokens",
        servetune=allowed,
        engine=cached,
        tolerance=0.0,
        agrees=agrees,
        message=message,
    )


def reconcile(client: ClientAccount, engine: EngineAccount | None, prompts: Prompts) -> Reconciliation:
    """servetune's account against the engine's (see the module docstring for the rules)."""
    if engine is None:
        note = (
            "not reconciled: the engine exposes no token counters (vLLM /metrics, llama.cpp --metrics) and "
            "returned no per-response timings (llama.cpp's)"
        )
        return Reconciliation(dialect=None, checks=[], notes=[note] if client.requests else [])
    if not client.requests:
        return Reconciliation(dialect=engine.dialect, source=engine.source, checks=[], notes=[])
    checks: list[Check] = []
    notes: list[str] = []
    failed = client.requests - client.completed
    if failed:
        notes.append(f"token totals not reconciled: {failed} of {client.requests} requests failed")
    else:
        if client.prompt_tokens is not None and engine.prompt_tokens is not None:
            checks.append(_total("prompt_tokens", client.prompt_tokens, engine.prompt_tokens, client.requests))
        if client.output_tokens is not None and engine.output_tokens is not None:
            checks.append(_total("output_tokens", client.output_tokens, engine.output_tokens, client.requests))
        if engine.requests is not None:
            agrees = engine.requests == client.completed
            checks.append(
                Check(
                    name="requests",
                    servetune=float(client.completed),
                    engine=engine.requests,
                    tolerance=0.0,
                    agrees=agrees,
                    message=f"finished requests: servetune saw {client.completed}, the engine {_n(engine.requests)}"
                    + ("" if agrees else " (someone else's requests ran, or the engine lost some)"),
                )
            )
    if prompts != "given":
        cached = _cached(client, engine, prompts)
        if cached is not None:
            checks.append(cached)
        else:
            notes.append("prompt cache not checked: the engine does not count cached prompt tokens (or no usage)")
    if engine.preemptions:
        notes.append(
            f"the engine preempted {_n(engine.preemptions)} requests (recomputed them): their latency includes it"
        )
    if engine.source == "timings":
        notes.append("reconciled with the engine's per-response timings (it serves no /metrics)")
    evaluated = engine.evaluated_tokens
    return Reconciliation(
        dialect=engine.dialect, source=engine.source, checks=checks, notes=notes, evaluated_tokens=evaluated
    )
