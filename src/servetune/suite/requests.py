"""The shapes of load probes ask for — one request, a prefix pair, one load level — as a Workload and a
LoadShape run on the context's backend, so a probe's figures are computed exactly like `servetune bench`'s (one
request is a closed-loop run of one request) and the same on a live server and in the simulator."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from servetune.load.shape import LoadShape, Timeouts
from servetune.load.workload import Workload
from servetune.metrics.record import RequestRecord
from servetune.metrics.slo import request_slos
from servetune.suite.spec import ProbeContext, ProbeLoad


@dataclass(frozen=True)
class Reply:
    """One measured request (vLLM's definitions; times in seconds)."""

    ok: bool
    ttft_s: float = 0.0
    e2el_s: float = 0.0
    tpot_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LoadPoint:
    """One load level as a curve point (figure names as the load-curve probe declares them)."""

    point: dict[str, float]
    requests: int
    failed: int
    warnings: list[str]
    slo_failures: list[str]


def _reply(record: RequestRecord, warnings: list[str]) -> Reply:
    if not record.ok:
        return Reply(ok=False, error=f"{record.error_class}: {record.error}", warnings=warnings)
    ttft = record.ttft_ns if record.ttft_ns is not None else record.e2el_ns
    tpot = record.tpot_ns
    return Reply(
        ok=True,
        ttft_s=ttft / 1e9,
        e2el_s=record.e2el_ns / 1e9,
        tpot_s=tpot / 1e9 if tpot is not None else None,
        output_tokens=record.output_tokens,
        prompt_tokens=record.prompt_tokens,
        warnings=warnings,
    )


def _shape(concurrency: int, requests: int, warmup: int = 0) -> LoadShape:
    return LoadShape.closed(concurrency, requests=requests, warmup_requests=warmup, seed=0, timeouts=Timeouts())


SINGLE = _shape(1, 1)
"""The run `single` makes: one request."""
PAIR = _shape(1, 2)
"""The run `prefix_pair` makes: two requests, one after the other."""
WARM_UP_TOKENS = 8
"""Output tokens of each warm-up request (`warm_up`)."""


def level_shape(concurrency: int, requests: int) -> LoadShape:
    """The run `load_point` makes: a closed loop of `concurrency` with one warm-up request per stream."""
    return _shape(concurrency, requests, warmup=concurrency)


def single_load(max_tokens: int, *sized_by: str) -> ProbeLoad:
    """`single`'s run asking `max_tokens`, priced (`ProbeSpec.loads`)."""
    return ProbeLoad(SINGLE, max_tokens, sized_by)


async def single(
    ctx: ProbeContext, *, prompt: str | None = None, prompt_tokens: int | None = None, max_tokens: int, ignore_eos: bool
) -> Reply:
    """One request: a given text (`prompt`), or a synthetic prompt of exactly `prompt_tokens` tokens (a long
    document when large), generating `max_tokens` (exactly, when `ignore_eos`)."""
    control = "ignore_eos" if ignore_eos else "none"
    if prompt is not None:
        workload = Workload.texts([prompt], max_tokens, seed=ctx.seed)
    else:
        workload = Workload.long_document(prompt_tokens or 64, max_tokens, **ctx.seeds)
    result = await ctx.backend.run(workload.model_copy(update={"output_control": control}), SINGLE)
    records = [r for r in result.records if r.phase == "measure"]
    if not records:
        return Reply(ok=False, error="no request was measured")
    return _reply(records[0], list(result.summary.validity.warnings))


async def prefix_pair(
    ctx: ProbeContext, system_tokens: int, question_tokens: int, max_tokens: int
) -> tuple[Reply, Reply]:
    """The same long system prompt (unique to this seed, so the first request is cold) with two different
    questions, one after the other."""
    workload = Workload.shared_prefix(system_tokens, question_tokens, max_tokens, **ctx.seeds)
    result = await ctx.backend.run(workload, PAIR)
    records = sorted((r for r in result.records if r.phase == "measure"), key=lambda r: r.index)
    warnings = list(result.summary.validity.warnings)
    if len(records) < 2:
        failed = Reply(ok=False, error="the prefix pair was not measured", warnings=warnings)
        return failed, failed
    return _reply(records[0], warnings), _reply(records[1], warnings)


async def load_point(
    ctx: ProbeContext, concurrency: int, requests: int, input_tokens: int, output_tokens: int
) -> LoadPoint:
    """One closed-loop load level (a warm-up of one request per stream, excluded) as a curve point.

    Each level draws its own prompts (a seed per level): levels of one curve sharing the context's seed sent the
    same texts again, so an engine with a prompt cache (llama.cpp's `cache-prompt`, vLLM's prefix caching)
    answered every level after the first from its cache and its TTFT measured a cache hit, not a prefill (the
    level's seeds: `ProbeContext.derive`)."""
    workload = Workload.synthetic(input_tokens, output_tokens, **ctx.derive(f"level/{concurrency}").seeds)
    slos = dict(ctx.slos)
    result = await ctx.backend.run(workload, level_shape(concurrency, requests), slos=request_slos(slos))
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
    if result.engine_time is not None:  # the engine's own split of the level's TTFT, in the client's clock like
        scale = ctx.backend.time_scale  # every other figure here (the probe converts them all to simulated time)
        point.update({k: v / scale for k, v in result.engine_time.figures(scale).items()})
    warnings = list(s.validity.warnings)
    return LoadPoint(point, s.completed + s.failed, s.failed, warnings, s.slo_failures(slos))


async def warm_up(ctx: ProbeContext, requests: int) -> None:
    """Short requests after ready, never measured (first requests pay one-off costs)."""
    for i in range(requests):
        await single(
            replace(ctx, seed=10_000 + i, text_seed=None), prompt_tokens=32, max_tokens=WARM_UP_TOKENS, ignore_eos=True
        )
