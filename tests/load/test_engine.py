"""The client against a real engine (llama.cpp's server on the tiny model): tokens, timeline, usage, chat."""

from __future__ import annotations

from servetune.control.client import ControlClient
from servetune.load.runner import run_load
from servetune.load.shape import LoadShape
from servetune.load.sweep import run_sweep
from servetune.load.workload import Workload
from servetune.metrics.prometheus import scrape
from servetune.metrics.slo import Slos


async def test_completions_and_chat_against_llama_server(llama_server, tiny_model) -> None:
    url, model = llama_server.base_url, llama_server.model_name
    workload = Workload.synthetic(48, 16)
    result = await run_load(
        url,
        model,
        workload,
        LoadShape.closed(2, requests=4, warmup_requests=1),
        tokenizer=str(tiny_model.tokenizer_json),
    )
    s = result.summary
    assert s.completed == 4 and s.failed == 0, [
        (r.error, r.http_status, len(r.chunk_ns), (r.done_ns - r.sent_ns) / 1e9) for r in result.records
    ]
    assert s.output_tokens == 64 and s.validity.short_requests == 0, s.validity.warnings
    # Every token is on the timeline, in order. Not `tpot > 0`: the tiny model decodes 16 tokens in a few ms, and
    # when the client's loop runs late (a busy CI machine) a whole answer after its first token arrives in one read,
    # stamped at one instant: a TPOT of 0 then is what the client saw (quiet CI, 2026-12-03: 60 gaps, p50 0 ms).
    assert s.ttft_ms.count == 4 and s.itl_ms.count == 60 and s.tpot_ms.count == 4 and s.tpot_ms.min >= 0
    for r in result.records:
        assert len(r.chunk_ns) == 16 and r.sent_ns < r.chunk_ns[0] and r.chunk_ns == sorted(r.chunk_ns)
        assert r.output_tokens_source == "usage" and r.http_status == 200
        assert r.prompt_tokens_expected == 48 and r.prompt_tokens is not None
        assert r.tokenizer_output_tokens is not None  # the local tokenizer cross-checks usage
    chat = await run_load(
        url, model, workload, LoadShape.closed(1, requests=2), endpoint="chat", extra_body={"temperature": 0}
    )
    assert chat.summary.completed == 2 and chat.summary.ttfc_ms.count == 2
    snapshot = await scrape(ControlClient(url))  # llama-server runs with --metrics in the shared fixture
    assert snapshot.samples


async def test_completions_and_chat_against_vllm(vllm_server, tiny_model) -> None:
    """vLLM's own SSE: a role chunk first in chat, usage in a last chunk with no choices, [DONE]."""
    url, model = vllm_server.base_url, vllm_server.model_name
    workload = Workload.synthetic(32, 12)
    for endpoint in ("completions", "chat"):
        result = await run_load(
            url,
            model,
            workload,
            LoadShape.closed(2, requests=4),
            endpoint=endpoint,
            tokenizer=str(tiny_model.tokenizer_json),
        )  # type: ignore[arg-type]
        s = result.summary
        assert s.completed == 4 and s.failed == 0, [(r.error_class, r.error) for r in result.records]
        assert s.output_tokens == 48 and s.validity.short_requests == 0, s.validity.warnings
        assert all(r.output_tokens_source == "usage" and r.finish_reason == "length" for r in result.records)
        assert all(len(r.chunk_ns) >= 1 and r.prompt_tokens for r in result.records)
    before = await scrape(ControlClient(url))
    assert before.get("generation_tokens") is not None and before.get("kv_cache_usage") is not None


async def test_goodput_and_sweep_stop_at_saturation(llama_server) -> None:
    """A server of real capacity (llama.cpp, 4 slots, CPU): a low rate is served in full (goodput = throughput
    under a lax SLO), a rate far above what two cores decode is not, and the sweep stops there saying why.
    (A mock server has no capacity: how fast it answers depends on the machine, so it cannot be the test's server.)"""
    url, model = llama_server.base_url, llama_server.model_name
    sweep = await run_sweep(
        url, model, Workload.synthetic(32, 10), LoadShape.open(1, requests=24), [2, 1e6], slos=Slos(ttft_ms=60_000)
    )
    # 1e6/s, not 2,000/s: the 24 arrivals then span 24 µs. At 2,000/s they spanned 12 ms (served ratio 0.19 on a
    # quiet machine), and once in CI, with the client's loop 73 ms late (p99), the ends came as close together as
    # the arrivals: a client that stamps late bunches them.
    assert sweep.saturated_at == 1e6 and "offered" in (sweep.reason or ""), sweep.reason
    first = sweep.points[0].result.summary
    assert first.goodput == first.request_throughput and first.failed == 0
