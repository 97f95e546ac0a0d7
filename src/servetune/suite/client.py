"""The suite's requests, all through the load generator (`servetune.load.runner.run_load`), so a probe's
figures are computed exactly like `servetune bench`'s: one request is a closed-loop run of one request.

Probes ask for "one request of this shape" or "one load level"; this module turns that into a Workload and
a LoadShape and the resulting records into the few numbers a probe reports."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servetune.suite.target import Scrape, Target


@dataclass(frozen=True)
class Reply:
    """One measured request (vLLM's definitions; times in seconds)."""

    ok: bool
    ttft_s: float = 0.0
    e2el_s: float = 0.0
    tpot_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Stats:
    requests: int
    failed: int
    warnings: list[str]


def _reply(record: Any, warnings: list[str]) -> Reply:
    if not record.ok:
        return Reply(ok=False, error=f"{record.error_class}: {record.error}", warnings=warnings)
    ttft = record.ttft_ns / 1e9 if record.ttft_ns is not None else record.e2el_ns / 1e9
    e2el = record.e2el_ns / 1e9
    n = record.output_tokens
    tpot = (e2el - ttft) / (n - 1) if n > 1 and record.ttft_ns is not None else None
    return Reply(
        ok=True,
        ttft_s=ttft,
        e2el_s=e2el,
        tpot_s=tpot,
        output_tokens=n,
        prompt_tokens=record.prompt_tokens,
        warnings=warnings,
    )


async def _run(target: Target, workload: Any, shape: Any, *, slos: Any = None) -> Any:
    from servetune.load.runner import run_load

    return await run_load(
        target.base_url,
        target.model,
        workload,
        shape,
        endpoint=target.client.endpoint,
        stream=target.client.stream,
        api_key=target.client.api_key,
        extra_body=target.body(),
        tokenizer=target.tokenizer,
        slos=slos,
    )


def _shape(concurrency: int, requests: int, timeout_s: float, warmup: int = 0) -> Any:
    from servetune.load.shape import LoadShape, Timeouts

    return LoadShape.closed(
        concurrency,
        requests=requests,
        warmup_requests=warmup,
        seed=0,
        timeouts=Timeouts(first_token_s=timeout_s, request_s=timeout_s),
    )


async def single(
    target: Target,
    *,
    prompt: str | None = None,
    prompt_tokens: int | None = None,
    max_tokens: int,
    ignore_eos: bool,
) -> Reply:
    """One request: a given text (`prompt`), or a synthetic prompt of exactly `prompt_tokens` tokens (a long
    document when large), generating `max_tokens` (exactly, when `ignore_eos`)."""
    from servetune.load.workload import Workload

    control = "ignore_eos" if ignore_eos else "none"
    if prompt is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "one.jsonl"
            key = (
                {"messages": [{"role": "user", "content": prompt}]}
                if target.client.endpoint == "chat"
                else {"prompt": prompt}
            )
            path.write_text(json.dumps({**key, "max_tokens": max_tokens}) + "\n")
            workload = Workload.from_file(str(path), format="jsonl", seed=target.seed).model_copy(
                update={"output_control": control}
            )
            result = await _run(target, workload, _shape(1, 1, target.client.request_timeout_s))
    else:
        workload = Workload.long_document(prompt_tokens or 64, max_tokens, seed=target.seed).model_copy(
            update={"output_control": control}
        )
        result = await _run(target, workload, _shape(1, 1, target.client.request_timeout_s))
    records = [r for r in result.records if r.phase == "measure"]
    if not records:
        return Reply(ok=False, error="no request was measured")
    return _reply(records[0], list(result.summary.validity.warnings))


async def prefix_pair(target: Target, system_tokens: int, question_tokens: int, max_tokens: int) -> tuple[Reply, Reply]:
    """The same long system prompt (unique to this seed, so the first request is cold) with two different
    questions, one after the other."""
    from servetune.load.workload import Workload

    workload = Workload.shared_prefix(system_tokens, question_tokens, max_tokens, seed=target.seed)
    result = await _run(target, workload, _shape(1, 2, target.client.request_timeout_s))
    records = sorted((r for r in result.records if r.phase == "measure"), key=lambda r: r.index)
    warnings = list(result.summary.validity.warnings)
    if len(records) < 2:
        failed = Reply(ok=False, error="the prefix pair was not measured", warnings=warnings)
        return failed, failed
    return _reply(records[0], warnings), _reply(records[1], warnings)


async def load_point(
    target: Target, concurrency: int, requests: int, input_tokens: int, output_tokens: int
) -> tuple[dict[str, float], Stats]:
    """One closed-loop load level (a warm-up of one request per stream, excluded) as a curve point."""
    from servetune.load.workload import Workload
    from servetune.metrics.slo import Slos

    bounds = _request_slos(target.slos)
    slos = Slos(**bounds) if bounds else None
    workload = Workload.synthetic(input_tokens, output_tokens, seed=target.seed)
    shape = _shape(concurrency, requests, target.client.request_timeout_s, warmup=concurrency)
    result = await _run(target, workload, shape, slos=slos)
    s = result.summary
    point: dict[str, float] = {
        "concurrency": float(concurrency),
        "request_rps": s.request_throughput,
        "output_tok_s": s.output_throughput,
        "error_rate": s.error_rate,
    }
    for name in ("ttft", "tpot", "itl", "e2el"):
        stat = getattr(s, f"{name}_ms")
        for q in ("p50", "p90", "p95", "p99"):
            value = getattr(stat, q)
            if value is not None:
                point[f"{name}_{q}_ms"] = value
    if s.goodput is not None:
        point["goodput_request_rps"] = s.goodput
    return point, Stats(requests=s.completed + s.failed, failed=s.failed, warnings=list(s.validity.warnings))


def _request_slos(slos: dict[str, float]) -> dict[str, float]:
    """The per-request bounds vLLM's goodput uses (ttft/tpot/e2el), taken from the p99 SLOs."""
    out = {}
    for name in ("ttft", "tpot", "e2el"):
        bound = slos.get(f"{name}_p99_ms")
        if bound is not None:
            out[f"{name}_ms"] = bound
    return out


async def models(target: Target) -> tuple[bool, int | None]:
    """Whether /v1/models lists the target's model, and the max_model_len it states."""
    import aiohttp

    headers = {"Authorization": f"Bearer {target.client.api_key}"} if target.client.api_key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            async with session.get(f"{target.base_url}/v1/models", headers=headers) as resp:
                data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return False, None
    for entry in data.get("data", []) if isinstance(data, dict) else []:
        if entry.get("id") == target.model:
            return True, entry.get("max_model_len")
    return False, None


def metrics_scraper(base_url: str) -> Scrape:
    """Reads the engine's /metrics through the metrics room (None when the engine has no /metrics)."""
    from servetune.errors import ServetuneError
    from servetune.metrics.prometheus import ascrape

    async def scrape() -> Any:
        try:
            return await ascrape(base_url)
        except ServetuneError:
            return None

    return scrape


async def warm_up(target: Target, requests: int) -> None:
    """Short requests after ready, never measured (first requests pay one-off costs)."""
    from dataclasses import replace

    for i in range(requests):
        await single(replace(target, seed=10_000 + i), prompt_tokens=32, max_tokens=8, ignore_eos=True)
