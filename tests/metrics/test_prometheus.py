"""Prometheus snapshots and deltas: vLLM's new and old metric names, and a live scrape of the mock server."""

from __future__ import annotations

import pytest

from servetune.control.client import ControlClient
from servetune.errors import ServetuneError
from servetune.load.runner import run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.prometheus import delta, parse, scrape
from servetune.mock.config import MockConfig
from servetune.mock.server import running

NEW = """# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} %d
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} %d
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} %d
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} %d
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} %d
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} %d
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} %f
"""

OLD = """# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} %d
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} %d
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} %f
"""


def test_delta_with_new_names() -> None:
    before = parse(NEW % (1000, 100, 10, 30, 15, 1, 0.1), taken_s=0)
    after = parse(NEW % (3000, 1100, 110, 330, 255, 4, 0.6), taken_s=2)
    d = delta(before, after)
    assert d.duration_s == 2
    assert d.prefix_cache_hit_rate == pytest.approx(1000 / 2000)
    assert d.spec_acceptance_rate == pytest.approx(240 / 300)
    assert d.spec_mean_acceptance_length == pytest.approx(1 + 240 / 100)
    assert d.num_preemptions == 3
    assert d.kv_cache_usage == pytest.approx(0.6)


def test_delta_with_old_names_and_missing_figures() -> None:
    d = delta(parse(OLD % (10, 0, 0.2)), parse(OLD % (110, 40, 0.5)))
    assert d.prefix_cache_hit_rate == pytest.approx(0.4)
    assert d.kv_cache_usage == pytest.approx(0.5)
    assert d.spec_acceptance_rate is None and d.num_preemptions is None


def test_counter_reset_gives_none() -> None:
    d = delta(parse(OLD % (500, 100, 0.1)), parse(OLD % (10, 0, 0.1)))
    assert d.prefix_cache_queries is None and d.prefix_cache_hit_rate is None


def test_bad_text_is_a_user_error() -> None:
    with pytest.raises(ServetuneError):
        parse("this is { not prometheus")


async def test_scrape_mock_server_prefix_hits() -> None:
    workload = Workload.shared_prefix(prefix_tokens=256, suffix_tokens=32, output_tokens=4)
    async with running(MockConfig(ttft_ms=1, itl_ms=1)) as url:
        before = await scrape(ControlClient(url))
        await run_load(url, "mock", workload, LoadShape.closed(1, requests=4))
        after = await scrape(ControlClient(url))
    d = delta(before, after)
    assert d.generation_tokens == 16 and d.prompt_tokens == 4 * 288
    assert d.prefix_cache_hits == 3 * 256  # the prefix hits from the second request on


async def test_scrape_of_nothing_fails_with_a_fix() -> None:
    with pytest.raises(ServetuneError) as err:
        await scrape(ControlClient("http://127.0.0.1:1"))
    assert err.value.fix
