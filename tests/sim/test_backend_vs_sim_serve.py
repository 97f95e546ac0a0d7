"""The in-process SimBackend and a live `sim-serve` (through LiveBackend, servetune's own HTTP client) agree: the
same workload and seed give the same requests, their summaries agree within the HTTP server's overhead, and their
`/metrics` counters move alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.launch import RunningEngine, launch
from servetune.load.backend import ClientSpec, LiveBackend
from servetune.load.shape import LoadShape
from servetune.load.workload import Dist, RequestClass, Workload
from servetune.metrics.prometheus import delta
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import deployment_for_config

SCALE = 2.0
"""sim-serve runs 2x faster than simulated time: short enough for a test, slow enough that its HTTP and asyncio
costs (well under a millisecond a token on a quiet machine) stay small beside a 16 ms step."""
FLAGS = {
    "max-model-len": 4096,
    "gpu": "H200",
    "vllm-version": "0.24.0",
    "enable-prefix-caching": True,
    "num-gpu-blocks-override": 300,
}
"""A dense model with a small KV pool (4,800 tokens): 16-token blocks hit the prefix cache, and a few long
requests at once preempt."""
CHAT = ClientSpec(endpoint="chat")
TOLERANCE = {"tpot": 0.15, "throughput": 0.15, "ttft": 0.5}
"""Relative agreement of median TPOT, output throughput and median TTFT (sim-serve in simulated time vs the
in-process backend; measured over 6 runs on a shared 2-core machine: TPOT within 2%, throughput within 0.5%,
TTFT 0.68-0.99x). TTFT is the loosest: the in-process backend admits simultaneous arrivals together, sim-serve
receives them one by one, the first alone in a short step and the next ones a step or two later under async
scheduling (see benchmarks/sim_fidelity/selfcheck.md)."""


@pytest.fixture(scope="module")
def sim_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    cfg = EngineConfig(engine="sim", model="qwen3-32b", served_model_name="m", flags={**FLAGS, "time-scale": SCALE})
    engine = launch(cfg, log_dir=tmp_path_factory.mktemp("sim-serve-logs"), startup_timeout_s=60)
    try:
        yield engine
    finally:
        report = engine.stop()
        assert report is not None and report.clean, report


def live(engine: RunningEngine) -> LiveBackend:
    return LiveBackend(engine.base_url, "m", client=CHAT, engine="sim", time_scale=SCALE)


def in_process() -> SimBackend:
    cfg = EngineConfig(engine="sim", model="qwen3-32b", served_model_name="m", flags=FLAGS)
    return SimBackend(deployment_for_config(cfg), client=CHAT)


async def measured(backend, workload: Workload, shape: LoadShape):
    before = await backend.scrape()
    result = await backend.run(workload, shape)
    return result, delta(before, await backend.scrape())


def test_same_requests_and_summaries(sim_serve: RunningEngine) -> None:
    workload = Workload(
        seed=11,
        classes=(
            RequestClass(input_tokens=Dist(kind="uniform", mean=300, std=80), output_tokens=48, turns=2),
            RequestClass(name="long", weight=0.5, input_tokens=900, output_tokens=Dist(kind="normal", mean=32, std=8)),
        ),
    )
    shape = LoadShape.closed(3, requests=9)
    got, _ = asyncio.run(measured(live(sim_serve), workload, shape))
    want, _ = asyncio.run(measured(in_process(), workload, shape))

    def lengths(result) -> list[tuple[int, int, str, int | None, int | None, int]]:
        return sorted(
            (r.index, r.turn, r.traffic_class, r.prompt_tokens, r.prompt_tokens_expected, r.output_tokens)
            for r in result.records
        )

    assert got.summary.failed == 0 and lengths(got) == lengths(want)
    live_s, sim_s = got.summary, want.summary
    assert live_s.tpot_ms.p50 * SCALE == pytest.approx(sim_s.tpot_ms.p50, rel=TOLERANCE["tpot"])
    assert live_s.output_throughput / SCALE == pytest.approx(sim_s.output_throughput, rel=TOLERANCE["throughput"])
    assert live_s.ttft_ms.p50 * SCALE == pytest.approx(sim_s.ttft_ms.p50, rel=TOLERANCE["ttft"])


def test_scrape_deltas_move_alike(sim_serve: RunningEngine) -> None:
    # One stream: the second request of the pair finds the system prompt cached, on both, to the token.
    pair = Workload.shared_prefix(2000, 40, 8, seed=21)
    _, live_hits = asyncio.run(measured(live(sim_serve), pair, LoadShape.closed(1, requests=2)))
    _, sim_hits = asyncio.run(measured(in_process(), pair, LoadShape.closed(1, requests=2)))
    assert live_hits.prefix_cache_hits == sim_hits.prefix_cache_hits
    assert sim_hits.prefix_cache_hits == (6 + 2000 + 5 + 6) // 16 * 16  # the template's markers are shared too
    assert live_hits.prompt_tokens == sim_hits.prompt_tokens
    # Six 700-token requests that grow by 200 each need 5,400 tokens of KV; the pool holds 4,800: both preempt.
    crowd = Workload.synthetic(700, 200, seed=22)
    _, live_crowd = asyncio.run(measured(live(sim_serve), crowd, LoadShape.closed(6, requests=6)))
    _, sim_crowd = asyncio.run(measured(in_process(), crowd, LoadShape.closed(6, requests=6)))
    assert (live_crowd.num_preemptions or 0) > 0 and (sim_crowd.num_preemptions or 0) > 0
    assert live_crowd.generation_tokens == sim_crowd.generation_tokens == 6 * 200


def test_unknown_model_is_404(sim_serve: RunningEngine) -> None:
    stranger = LiveBackend(sim_serve.base_url, "nosuch", client=CHAT)
    result = asyncio.run(stranger.run(Workload.synthetic(8, 2), LoadShape.closed(1, requests=1)))
    assert result.records[0].http_status == 404


def test_every_flag_of_the_config_is_modelled(sim_serve: RunningEngine) -> None:
    assert Path(sim_serve.log_path).read_text().count("ignoring flag") == 0
