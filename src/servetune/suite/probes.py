"""The suite: seed 001's B1–B6 plus a load curve and the acceptance check, each a small function
`async probe(target, params) -> ProbeResult` usable on its own, named by what it measures.

Requests go through `servetune.suite.client` (the load generator underneath), engine counters through
`target.scrape`; every figure follows vLLM's definitions (ttft, tpot = (e2el − ttft)/(n − 1), e2el)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from servetune.suite import client
from servetune.suite.params import (
    Acceptance,
    DecodeSpeed,
    LoadCurve,
    LongGeneration,
    LongPrefill,
    MemoryHeadroom,
    PrefixReuse,
    ShortLatency,
)
from servetune.suite.result import ProbeResult
from servetune.suite.target import Target

SATURATION_GAIN = 0.05
"""The load curve stops once a concurrency step raises output throughput by less than this."""
OUTPUT_MARGIN = 64
"""Tokens kept free under max_model_len for the answer when a prompt is sized to the context."""
QUESTION_TOKENS = 32
"""Length of each question after the shared system prompt in the prefix probe."""
"""Tokens kept free under max_model_len for the answer when a prompt is sized to the context."""


def _single_result(probe: str, reply: client.Reply, figures: dict[str, float | None], **extra: Any) -> ProbeResult:
    warnings = list(reply.warnings)
    return ProbeResult(
        probe=probe,
        ok=reply.ok,
        figures=figures if reply.ok else {},
        requests=1,
        failed_requests=0 if reply.ok else 1,
        warnings=warnings,
        error=reply.error,
        **extra,
    )


def _speed_figures(reply: client.Reply, requested: int) -> tuple[dict[str, float | None], list[str]]:
    n = reply.output_tokens
    figures: dict[str, float | None] = {
        "output_tokens": float(n),
        "ttft_ms": reply.ttft_s * 1000,
        "e2el_ms": reply.e2el_s * 1000,
        "output_tok_s": n / reply.e2el_s if reply.e2el_s > 0 else None,
        "tpot_ms": reply.tpot_s * 1000 if reply.tpot_s is not None else None,
        "decode_tok_s": 1 / reply.tpot_s if reply.tpot_s else None,
    }
    notes = [] if n == requested else [f"asked for {requested} output tokens, got {n}: speed is per token received"]
    return figures, notes


async def short_latency(target: Target, p: ShortLatency) -> ProbeResult:
    """B1: one short chat request (seed 001: "你好", max 32 tokens): end-to-end time."""
    reply = await client.single(target, prompt=p.prompt, max_tokens=p.max_tokens, ignore_eos=False)
    figures = {"e2el_ms": reply.e2el_s * 1000, "ttft_ms": reply.ttft_s * 1000, "output_tokens": reply.output_tokens}
    return _single_result("short_latency", reply, figures)


async def decode_speed(target: Target, p: DecodeSpeed) -> ProbeResult:
    """B2: one stream generating N tokens (default 512, end of sequence ignored): tokens per second."""
    reply = await client.single(target, max_tokens=p.output_tokens, ignore_eos=True)
    figures, notes = _speed_figures(reply, p.output_tokens)
    return _single_result("decode_speed", reply, figures, notes=notes)


async def long_prefill(target: Target, p: LongPrefill) -> ProbeResult:
    """B3: one long document (default ≈24k tokens, capped to fit max_model_len): time to first token."""
    tokens = p.prompt_tokens
    notes = []
    if target.max_model_len and tokens > target.max_model_len - p.max_tokens - OUTPUT_MARGIN:
        tokens = max(16, target.max_model_len - p.max_tokens - OUTPUT_MARGIN)
        notes.append(
            f"prompt capped from {p.prompt_tokens} to {tokens} tokens to fit max_model_len {target.max_model_len}"
        )
    reply = await client.single(target, prompt_tokens=tokens, max_tokens=p.max_tokens, ignore_eos=True)
    figures: dict[str, float | None] = {
        "ttft_s": reply.ttft_s,
        "e2el_s": reply.e2el_s,
        "prompt_tokens": float(reply.prompt_tokens or tokens),
        "prefill_tok_s": (reply.prompt_tokens or tokens) / reply.ttft_s if reply.ttft_s > 0 else None,
    }
    return _single_result("long_prefill", reply, figures, notes=notes)


def _delta(before: Any, after: Any) -> Any:
    """The engine's counter changes between two scrapes (None when it exposes no /metrics)."""
    if before is None or after is None:
        return None
    from servetune.metrics.prometheus import delta

    return delta(before, after)


async def prefix_reuse(target: Target, p: PrefixReuse) -> ProbeResult:
    """B4: the same long system prompt twice with different questions: how much the second TTFT drops, and
    the share of the second prompt the engine served from its prefix cache (its own counters; the system
    prompt is unique to the run, so the first request is cold and every hit belongs to the second)."""
    before = await target.scrape()
    cold, warm = await client.prefix_pair(target, p.system_tokens, QUESTION_TOKENS, p.max_tokens)
    d = _delta(before, await target.scrape())
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


async def memory_headroom(target: Target, p: MemoryHeadroom) -> ProbeResult:
    """B5: memory left per GPU (NVML), the smallest across GPUs; without a GPU, the host's available memory
    and the engine's KV-cache usage."""
    from servetune.suite.memory import gpu_memory, host_memory

    snapshot = await target.scrape()
    kv_usage = snapshot.get("kv_cache_usage") if snapshot is not None else None
    figures: dict[str, float | None] = {"kv_cache_usage_pct": 100 * kv_usage if kv_usage is not None else None}
    gpus = gpu_memory() if target.gpu_count else []
    if gpus:
        free = [(total - used) for used, total in gpus]
        figures["headroom_mib"] = min(free) / 2**20
        figures["headroom_pct"] = min(100 * f / total for f, (_, total) in zip(free, gpus, strict=True))
        notes = [f"NVML, {len(gpus)} GPU(s)"]
    else:
        available, total = host_memory()
        figures["headroom_mib"] = available / 2**20
        figures["headroom_pct"] = 100 * available / total
        notes = ["no GPU: host memory (MemAvailable / MemTotal)"]
    return ProbeResult(probe="memory_headroom", figures=figures, notes=notes)


async def long_generation(target: Target, p: LongGeneration) -> ProbeResult:
    """B6: one stream generating 2048 tokens, where speculative decoding shows; with the engine's draft
    acceptance counters."""
    before = await target.scrape()
    reply = await client.single(target, max_tokens=p.output_tokens, ignore_eos=True)
    d = _delta(before, await target.scrape())
    figures, notes = _speed_figures(reply, p.output_tokens)
    if d is not None and d.spec_acceptance_rate is not None:
        figures["spec_acceptance_pct"] = 100 * d.spec_acceptance_rate
        figures["spec_mean_accept_len"] = d.spec_mean_acceptance_length
    else:
        notes.append("no speculative-decoding counters moved (spec decode off, or the engine exposes none)")
    return _single_result("long_generation", reply, figures, notes=notes)


def _meets(point: dict[str, float], slos: dict[str, float]) -> bool:
    for key, bound in slos.items():
        if key == "error_rate":
            if point.get("error_rate", 0.0) > bound:
                return False
        elif key.endswith("_ms") and key in point and point[key] > bound:
            return False
    return True


async def load_curve(target: Target, p: LoadCurve) -> ProbeResult:
    """Throughput against latency over a concurrency sweep, stopping at saturation; goodput = the highest
    request rate (slo_output_tok_s: output rate) at a level whose percentiles meet every latency SLO."""
    points: list[dict[str, float]] = []
    warnings: list[str] = []
    requests = failed = 0
    best = 0.0
    for concurrency in p.concurrency:
        n = max(p.requests_per_point, 2 * concurrency)
        point, stats = await client.load_point(target, concurrency, n, p.input_tokens, p.output_tokens)
        requests += stats.requests
        failed += stats.failed
        warnings += stats.warnings
        point["meets_slo"] = 1.0 if _meets(point, target.slos) else 0.0
        points.append(point)
        gain = point.get("output_tok_s", 0.0)
        if p.stop_at_saturation and best > 0 and gain < best * (1 + SATURATION_GAIN):
            break
        best = max(best, gain)
    meeting = [pt for pt in points if pt["meets_slo"]]
    peak = max(points, key=lambda pt: pt.get("output_tok_s", 0.0)) if points else {}
    figures: dict[str, float | None] = {
        "goodput_rps": max((pt.get("request_rps", 0.0) for pt in meeting), default=0.0),
        "slo_output_tok_s": max((pt.get("output_tok_s", 0.0) for pt in meeting), default=0.0),
        "max_output_tok_s": peak.get("output_tok_s"),
        "saturation_concurrency": peak.get("concurrency"),
        "slo_max_concurrency": max((pt["concurrency"] for pt in points if pt["meets_slo"]), default=0.0),
    }
    ok = bool(points) and failed < requests
    return ProbeResult(
        probe="load_curve",
        ok=ok,
        figures=figures,
        points=points,
        requests=requests,
        failed_requests=failed,
        warnings=sorted(set(warnings)),
    )


async def acceptance(target: Target, p: Acceptance) -> ProbeResult:
    """The seeds' acceptance test: /v1/models lists the model, a short chat answers, a long-context request
    completes (default: half of max_model_len)."""
    listed, max_len = await client.models(target)
    chat = await client.single(target, prompt="Hello", max_tokens=8, ignore_eos=False)
    length = p.long_context_tokens or max(16, (target.max_model_len or max_len or 2048) // 2)
    long = await client.single(target, prompt_tokens=length, max_tokens=8, ignore_eos=True)
    passed = listed and chat.ok and long.ok
    figures: dict[str, float | None] = {
        "passed": 1.0 if passed else 0.0,
        "model_listed": 1.0 if listed else 0.0,
        "chat_s": chat.e2el_s if chat.ok else None,
        "long_context_s": long.e2el_s if long.ok else None,
        "long_context_tokens": float(length),
    }
    errors = [e for e in (chat.error, long.error) if e]
    return ProbeResult(
        probe="acceptance",
        ok=True,
        figures=figures,
        requests=2,
        failed_requests=int(not chat.ok) + int(not long.ok),
        error="; ".join(errors) or None,
        notes=[] if listed else [f"/v1/models does not list {target.model}"],
    )


PROBE_FUNCTIONS: dict[str, Callable[[Target, Any], Awaitable[ProbeResult]]] = {
    "acceptance": acceptance,
    "short_latency": short_latency,
    "decode_speed": decode_speed,
    "long_prefill": long_prefill,
    "prefix_reuse": prefix_reuse,
    "memory_headroom": memory_headroom,
    "long_generation": long_generation,
    "load_curve": load_curve,
}
