"""sim-serve speaks vLLM's OpenAI API: streaming usage, chat, /metrics names, /tokenize, errors."""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from servetune.sim.deployment import build_deployment
from servetune.sim.flags import parse_sim_args
from servetune.sim.server import SimServer

ARGV = [
    "qwen3.6-27b",
    "--max-model-len",
    "32768",
    "--language-model-only",
    "--gpu",
    "H200",
    "--served-model-name",
    "m",
    "--time-scale",
    "50",
    "--enable-prefix-caching",
]


@pytest.fixture
async def client():
    server = SimServer(build_deployment(parse_sim_args(ARGV)))
    import asyncio

    task = asyncio.create_task(server.run_engine())
    async with TestClient(TestServer(server.app())) as c:
        yield c
    task.cancel()


def events(text: str) -> list[dict]:
    out = []
    for block in text.strip().split("\n\n"):
        payload = block.removeprefix("data: ")
        if payload != "[DONE]":
            out.append(json.loads(payload))
    assert text.strip().endswith("data: [DONE]")
    return out


async def test_models_health_tokenize(client) -> None:
    assert (await client.get("/health")).status == 200
    models = await (await client.get("/v1/models")).json()
    assert models["data"][0]["id"] == "m" and models["data"][0]["max_model_len"] == 32768
    tok = await (await client.post("/tokenize", json={"prompt": "one two three"})).json()
    assert tok["count"] == len(tok["tokens"]) == 3


async def test_streamed_completion_usage(client) -> None:
    body = {
        "model": "m",
        "prompt": list(range(100, 400)),
        "max_tokens": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    resp = await client.post("/v1/completions", json=body)
    assert resp.status == 200
    evs = events(await resp.text())
    texts = [e for e in evs if e["choices"]]
    assert len(texts) == 7 and texts[-1]["choices"][0]["finish_reason"] == "length"
    assert evs[-1]["choices"] == [] and evs[-1]["usage"] == {
        "prompt_tokens": 300,
        "total_tokens": 307,
        "completion_tokens": 7,
    }


async def test_chat_stream_and_whole(client) -> None:
    msgs = [{"role": "user", "content": "hello"}]
    resp = await client.post(
        "/v1/chat/completions", json={"model": "m", "messages": msgs, "max_tokens": 4, "stream": True}
    )
    evs = events(await resp.text())
    assert evs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert sum(1 for e in evs if e["choices"][0]["delta"].get("content")) == 4
    assert "usage" not in evs[-1]
    whole = await (
        await client.post("/v1/chat/completions", json={"model": "m", "messages": msgs, "max_completion_tokens": 5})
    ).json()
    assert whole["usage"]["completion_tokens"] == 5 and whole["choices"][0]["message"]["content"]


async def test_too_long_is_vllms_400(client) -> None:
    resp = await client.post("/v1/completions", json={"model": "m", "prompt": [1] * 32000, "max_tokens": 1000})
    assert resp.status == 400
    assert "maximum context length is 32768 tokens" in (await resp.json())["message"]


async def test_metrics_use_vllm_names_and_count_prefix_hits(client) -> None:
    prompt = list(range(1000, 3000))  # 2000 tokens: two full 784-token blocks
    for _ in range(2):
        await client.post("/v1/completions", json={"model": "m", "prompt": prompt, "max_tokens": 2})
    text = await (await client.get("/metrics")).text()
    values = {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#") and "_bucket" not in line and "finished_reason" not in line
    }
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count",
        "vllm:request_prefill_time_seconds_count",
        "vllm:request_decode_time_seconds_sum",
        "vllm:request_inference_time_seconds_sum",
        "vllm:iteration_tokens_total_count",
    ):
        assert name in values, name
    assert values["vllm:prompt_tokens_total"] == 4000
    assert values["vllm:generation_tokens_total"] == 4
    assert values["vllm:prefix_cache_queries_total"] == 4000
    assert values["vllm:prefix_cache_hits_total"] == 1568
    assert values["vllm:request_prefill_time_seconds_count"] == 2
    # vLLM's iteration tokens: each prompt's computed tokens in its first token's iteration, then the tokens made
    assert values["vllm:iteration_tokens_total_sum"] == 2000 + (2000 - 1568) + 4


async def test_speculative_chunks_and_counters() -> None:
    import asyncio

    argv = [*ARGV, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 1.0}']
    server = SimServer(build_deployment(parse_sim_args(argv)))
    task = asyncio.create_task(server.run_engine())
    async with TestClient(TestServer(server.app())) as c:
        resp = await c.post(
            "/v1/completions",
            json={
                "model": "m",
                "prompt": [5] * 50,
                "max_tokens": 31,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        evs = events(await resp.text())
        # First token from the prefill, then 3 tokens per step (both drafts accepted): 1 + 10 chunks.
        assert len([e for e in evs if e["choices"]]) == 11
        assert evs[-1]["usage"]["completion_tokens"] == 31
        text = await (await c.get("/metrics")).text()
    task.cancel()
    assert 'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 20.0' in text
    assert 'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 20.0' in text
