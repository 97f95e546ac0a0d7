"""run_load against the mock server: load shapes, phases, endpoints, streaming or not, keys and passthrough."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest

from servetune.errors import ServetuneError
from servetune.load.runner import run_load, run_load_sync
from servetune.load.shape import LoadShape
from servetune.load.workload import RequestClass, Workload
from servetune.mock.config import MockConfig
from servetune.mock.server import running

W = Workload.synthetic(32, 10)


async def test_closed_loop_counts_warmup_and_truth() -> None:
    """The warm-up is counted apart, the figures are the mock's, and nothing is wrong with the run. Only the
    client's own verdict is left out: whether its event loop ran late is the machine's load, and on a loaded one
    it rightly says the client limited the run (p99 6.4 ms under a CPU hog)."""
    async with running(MockConfig(ttft_ms=30, itl_ms=5)) as url:
        result = await run_load(url, "mock", W, LoadShape.closed(4, requests=12, warmup_requests=4))
    s = result.summary
    assert s.completed == 12 and s.failed == 0 and s.validity.warmup_excluded == 4
    assert len([r for r in result.records if r.phase == "measure"]) == 12
    assert s.peak_concurrency <= 4
    assert abs(s.ttft_ms.p50 - 30) < 5 and abs(s.itl_ms.p50 - 5) < 1.5 and abs(s.tpot_ms.p50 - 5) < 1
    assert s.output_tokens == 120 and not [w for w in s.validity.warnings if not w.startswith("the client ")], (
        s.validity.warnings
    )
    assert all(r.prompt_tokens == r.prompt_tokens_expected == 32 for r in result.records)  # exact via /tokenize


async def test_open_loop_poisson_rate_and_lateness() -> None:
    async with running(MockConfig(ttft_ms=2, itl_ms=1)) as url:
        result = await run_load(url, "mock", Workload.synthetic(8, 4), LoadShape.open(100, requests=150, seed=3))
    sched = np.array(sorted(r.scheduled_ns for r in result.records)) / 1e9
    assert 70 < (len(sched) - 1) / (sched[-1] - sched[0]) < 140
    assert result.summary.completed == 150
    assert result.summary.validity.lateness_p50_ms < 25  # generous: the test machine is shared


def test_arrival_processes() -> None:
    const = LoadShape.open(10, arrival="constant", requests=1).arrivals(11)
    assert np.allclose(np.diff(const), 0.1)
    bursty = np.diff(LoadShape.open(10, arrival="gamma", burstiness=0.2, requests=1).arrivals(20000))
    smooth = np.diff(LoadShape.open(10, arrival="gamma", burstiness=5, requests=1).arrivals(20000))
    assert abs(bursty.mean() - 0.1) < 0.01 and abs(smooth.mean() - 0.1) < 0.01
    assert bursty.std() > 2 * np.diff(LoadShape.open(10, requests=1).arrivals(20000)).std() > 2 * smooth.std()


async def test_open_loop_concurrency_cap() -> None:
    async with running(MockConfig(ttft_ms=20, itl_ms=2)) as url:
        result = await run_load(url, "mock", W, LoadShape.open(float("inf"), requests=20, max_concurrency=3))
    assert result.summary.peak_concurrency == 3 and result.summary.completed == 20


def test_a_closed_loop_ramps_its_streams_over_the_warm_up() -> None:
    assert LoadShape.closed(4, requests=1, warmup_s=2.0).stream_starts() == [0.0, 0.5, 1.0, 1.5]
    assert LoadShape.closed(4, requests=1, warmup_s=2.0, ramp_s=0).stream_starts() == [0.0] * 4
    assert LoadShape.closed(2, requests=1, ramp_s=1.0).stream_starts() == [0.0, 0.5]
    assert LoadShape.closed(3, requests=1, warmup_requests=9).stream_starts() == [0.0] * 3  # nothing to ramp over
    with pytest.raises(ServetuneError, match="closed loop"):
        LoadShape.open(5.0, requests=1, ramp_s=1.0)


@pytest.mark.parametrize("workers", [1, 2])
async def test_ramped_streams_start_spread_and_are_replaced_at_once(workers: int) -> None:
    """8 streams over 0.8 s of warm-up: one starts every 0.1 s (in process and across worker processes alike);
    a 60 ms conversation that ends during the ramp is followed at once, so the loop holds every started stream.

    Judged on the mean number in flight over each 0.1 s step (sampled every ms), not at one instant per step: with
    worker processes a stream that ends waits for two messages (done, then go) before it goes on, a few ms on an
    idle machine and tens on a loaded one, and one instant could catch two streams in that gap at once (CI: a
    sample of k−1): each stream is idle between two requests about 10% of the time here, more on a loaded machine.
    A stream left waiting for the next ramp tick would be idle about 40% of it."""
    shape = LoadShape.closed(8, duration_s=0.5, warmup_s=0.8)
    async with running(MockConfig(ttft_ms=30, itl_ms=3)) as url:
        result = await run_load(url, "mock", W, shape, tokenizer="words", workers=workers)
    t0 = min(r.sent_ns for r in result.records)
    spans = np.array([(r.sent_ns - t0, r.done_ns - t0) for r in result.records], dtype=np.int64)
    ms = np.arange(800) * 1_000_000 + 500_000
    in_flight = ((spans[:, :1] <= ms) & (ms < spans[:, 1:])).sum(axis=0)
    fill = [float(in_flight[100 * k : 100 * (k + 1)].mean()) for k in range(8)]
    assert all(in_flight[: 100 * (k + 1)].max() <= k + 2 for k in range(8)), fill  # never ahead of the ramp
    assert all(n >= 0.7 * (k + 1) for k, n in enumerate(fill)), fill  # k+1 started, each busy most of the time
    assert sum(fill) >= 28, fill  # of 36: a stream that ends goes on at once (waiting for the next tick: about 22)
    assert result.summary.peak_concurrency <= 8


async def test_duration_bound_with_warmup_and_cooldown() -> None:
    async with running(MockConfig(ttft_ms=5, itl_ms=1)) as url:
        result = await run_load(url, "mock", W, LoadShape.closed(2, duration_s=0.6, warmup_s=0.2, cooldown_s=0.2))
    phases = {p: [r for r in result.records if r.phase == p] for p in ("warmup", "measure", "cooldown")}
    assert all(phases.values())
    start = min(r.sent_ns for r in result.records)
    assert max(r.dispatched_ns for r in phases["warmup"]) - start < 0.25e9
    assert max(r.dispatched_ns for r in phases["measure"]) - min(r.dispatched_ns for r in phases["measure"]) < 0.65e9
    assert result.summary.completed == len(phases["measure"])


async def test_chat_reasoning_counted_and_reported_apart() -> None:
    async with running(MockConfig(ttft_ms=10, itl_ms=4, reasoning_tokens=3)) as url:
        result = await run_load(url, "mock", W, LoadShape.closed(1, requests=2), endpoint="chat")
    s = result.summary
    assert s.output_tokens == 20 and s.reasoning_tokens == 6
    assert all(r.reasoning_chunks == 3 and len(r.chunk_ns) == 10 for r in result.records)
    assert s.ttfc_ms.p50 - s.ttft_ms.p50 == pytest.approx(12, abs=2.5)  # three reasoning tokens come first


async def test_non_streamed_requests() -> None:
    async with running(MockConfig(ttft_ms=10, itl_ms=2)) as url:
        result = await run_load(url, "mock", W, LoadShape.closed(2, requests=4), stream=False, endpoint="chat")
    s = result.summary
    assert s.completed == 4 and s.output_tokens == 40 and s.ttft_ms.count == 0
    assert s.e2el_ms.p50 == pytest.approx(10 + 9 * 2, abs=5)


async def test_api_key_and_extra_body_pass_through() -> None:
    async with running(MockConfig(ttft_ms=1, itl_ms=1, api_key="sekrit")) as url:
        denied = await run_load(url, "mock", W, LoadShape.closed(1, requests=1))
        allowed = await run_load(
            url, "mock", W, LoadShape.closed(1, requests=1), api_key="sekrit", extra_body={"max_tokens": 3}
        )
    assert denied.summary.errors_by_class == {"http_4xx": 1}
    assert allowed.summary.completed == 1 and allowed.records[0].output_tokens == 3


async def test_multi_turn_conversations_run_in_order() -> None:
    async with running(MockConfig(ttft_ms=2, itl_ms=1)) as url:
        result = await run_load(
            url,
            "mock",
            Workload.mix([RequestClass(name="chat", input_tokens=8, output_tokens=4, turns=3)]),
            LoadShape.closed(2, requests=4),
            endpoint="chat",
        )
    by_conv: dict[int, list] = {}
    for r in result.records:
        by_conv.setdefault(r.conversation, []).append(r)
    assert len(by_conv) == 4 and all(len(v) == 3 for v in by_conv.values())
    for turns in by_conv.values():
        turns.sort(key=lambda r: r.turn)
        assert all(a.done_ns <= b.sent_ns for a, b in itertools.pairwise(turns))
        assert turns[0].prompt_tokens < turns[1].prompt_tokens < turns[2].prompt_tokens


def test_sync_wrapper() -> None:
    import asyncio
    import threading

    from servetune.mock.server import serve_forever

    ports: list[int] = []
    ready = threading.Event()
    loop = asyncio.new_event_loop()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        task = loop.create_task(
            serve_forever(MockConfig(ttft_ms=1, itl_ms=1), "127.0.0.1", 0, lambda p: (ports.append(p), ready.set()))
        )
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(5)
    try:
        result = run_load_sync(f"http://127.0.0.1:{ports[0]}", "mock", W, LoadShape.closed(1, requests=2))
        assert result.summary.completed == 2
        assert '"records"' not in result.to_json() and '"records"' in result.to_json(records=True)
    finally:
        for task in asyncio.all_tasks(loop):
            loop.call_soon_threadsafe(task.cancel)
        thread.join(5)
