"""Steady state: MSER-5 finds a start-up transient and servetune's runs count it as warm-up; a flat run keeps every
measured request; a window that never settles is not valid; a stall is flagged, never absorbed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np

from servetune.load.runner import run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.record import RequestRecord
from servetune.metrics.steady import mser5, settle, steady_state, trend
from servetune.metrics.validity import check_validity
from servetune.mock.config import MockConfig
from servetune.mock.server import running

W = Workload.synthetic(16, 16)


def test_mser5_is_aiperfs() -> None:
    """Batch means of 5, the cut minimizing their variance over their number, at most half the batches; too short
    a series is not cut."""
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 1, 100)
    step = np.concatenate([np.full(20, 50.0), np.zeros(80)]) + noise
    assert 20 <= mser5(step) <= 50  # MSER over-cuts a noisy steady part (35 here): servetune trims it back
    assert mser5(np.arange(100.0)[::-1]) == 50  # a trend to the end: cut at the cap
    assert mser5(np.arange(9.0)) == 0 and mser5(np.arange(19.0)[::-1]) == 0  # under 10 values, under 4 batches
    assert trend(np.arange(100.0)[::-1] + 100) is not None and trend(100 + noise) is None


async def test_a_trending_warm_up_is_extended_and_a_flat_one_is_not() -> None:
    """The mock's TTFT falls from 1,200 to 300 ms over its first 20 requests; the fixed warm-up covers 4 of them:
    the requests still on the way down are found (MSER-5 cuts in fives) and counted as warm-up, the run says where
    the transient ended, and the figures are the steady server's. The same run on a flat mock keeps all 100.
    TTFTs of hundreds of ms, so that a loaded machine's client delays (tens of ms, most at the start) stay below
    the rule's 20% (at 50 ms they were a transient of their own under a CPU hog, and moved MSER's cut by batches);
    an ITL of 25 ms, so that the first wave's wait (1.2 s, every stream waiting) is under the stall rule's 50 ITLs."""
    trending = MockConfig(ttft_ms=300, itl_ms=25, settle_requests=20, settle_ttft_ms=1200)
    shape = LoadShape.closed(4, requests=100, warmup_requests=4)
    async with running(trending) as url:
        result = await run_load(url, "mock", W, shape)
    moved = [r for r in result.records if r.transient]
    steady = result.summary.validity.steady
    assert steady is not None and steady.moved and steady.steady and steady.metric == "ttft"
    assert 15 <= len(moved) <= 25 and steady.transient == len(moved), steady
    assert all(r.phase == "warmup" for r in moved) and result.summary.completed == 100 - len(moved)
    first_steady = min(r.sent_ns for r in result.records if r.phase == "measure")
    t0 = min(r.sent_ns for r in result.records)
    assert steady.ended_at_s == (first_steady - t0) / 1e9 and max(r.sent_ns for r in moved) < first_steady
    assert steady.before_ms is not None and steady.before_ms > 100 and result.summary.ttft_ms.p50 < 360
    assert not any("steady" in w for w in result.summary.validity.warnings)
    assert settle(result.records) == 0  # settled once: settling again moves nothing

    async with running(MockConfig(ttft_ms=300, itl_ms=25)) as url:
        flat = await run_load(url, "mock", W, shape)
    assert flat.summary.completed == 100 and not any(r.transient for r in flat.records)
    assert flat.summary.validity.steady == steady_state(flat.records)
    assert flat.summary.validity.steady.steady and flat.summary.validity.steady.transient == 0


def _held_at_start(seconds: float, every_s: float = 0.01, spin_s: float = 0.025) -> Callable[[RequestRecord], None]:
    """An `on_record` that holds this event loop up from the run's first record on, as a loaded client machine
    does (most at the start): for `seconds`, a callback that spins `spin_s` every `every_s`. The client in this
    process, and the mock in it, run that late. From the first record, not from the call: the run's set-up before
    its clock starts takes a varying part of a second on a loaded machine."""
    loop = asyncio.get_running_loop()
    end: list[float] = []

    def block() -> None:
        until = time.monotonic() + spin_s
        while time.monotonic() < until:
            pass
        if time.monotonic() < end[0]:
            loop.call_later(every_s, block)

    def on_record(_: RequestRecord) -> None:
        if not end:
            end.append(time.monotonic() + seconds)
            loop.call_soon(block)

    return on_record


async def test_a_late_client_is_not_the_servers_warm_up() -> None:
    """The client's loop held up over the first 0.4 s of a run on a flat 20 ms mock: its first requests' TTFT
    looked 10-15 ms slower than the rest's (that had moved 15 to 20 of them to warm-up), but the client's loop was
    about 23 ms later over them too, so the difference is the client's and nothing is moved. A mock whose TTFT
    falls from 400 to 50 ms under the same held-up loop still has its transient found and moved."""
    shape = LoadShape.closed(4, requests=60, warmup_requests=4)
    async with running(MockConfig(ttft_ms=20, itl_ms=4)) as url:
        flat = await run_load(url, "mock", W, shape, tokenizer="words", on_record=_held_at_start(0.4))
    assert flat.summary.completed == 60 and not any(r.transient for r in flat.records), flat.summary.validity.steady
    lag = [r.loop_lag_first_ns / 1e6 for r in sorted(flat.records, key=lambda r: r.sent_ns) if r.phase == "measure"]
    assert np.mean(lag[:10]) > np.mean(lag[10:]) + 5, lag  # the loop was held up, most over the first requests

    trending = MockConfig(ttft_ms=50, itl_ms=5, settle_requests=20, settle_ttft_ms=400)
    async with running(trending) as url:
        result = await run_load(url, "mock", W, shape, tokenizer="words", on_record=_held_at_start(0.4))
    steady = result.summary.validity.steady
    assert steady is not None and steady.moved and steady.metric == "ttft" and 10 <= steady.transient <= 25, steady


async def test_a_window_that_never_settles_is_not_valid() -> None:
    """TTFT falls over the mock's first 100 requests, past the end of a 64-request run: nothing is moved (no cut
    makes it steady) and the verdict says it never became steady."""
    async with running(MockConfig(ttft_ms=50, itl_ms=5, settle_requests=100, settle_ttft_ms=400)) as url:
        result = await run_load(url, "mock", W, LoadShape.closed(4, requests=60, warmup_requests=4))
    v = result.summary.validity
    assert v.steady is not None and not v.steady.steady and v.steady.trend is not None
    assert result.summary.completed == 60 and not v.ok
    assert any(w.startswith("the measured window never became steady: TTFT fell") for w in v.warnings)


def _record(index: int, sent_s: float, ttft_s: float, *, itl_s: float = 0.01, n: int = 10) -> RequestRecord:
    """A streamed request, its times in seconds from 1 s."""
    first = 1 + sent_s + ttft_s
    chunks = [int((first + k * itl_s) * 1e9) for k in range(n)]
    sent = int((1 + sent_s) * 1e9)
    return RequestRecord(
        index=index, scheduled_ns=sent, sent_ns=sent, chunk_ns=chunks, done_ns=chunks[-1] + 1, output_tokens=n
    )


def test_another_tools_transient_is_reported_not_moved() -> None:
    """Records read back from another tool were never settled: a transient in them is a warning that names where
    it ended, and the records stay as they were."""
    noise = np.random.default_rng(4).normal(0, 0.004, 60)  # MSER-5 alone cuts this at 30: trimmed back to 15
    records = [_record(i, 0.05 * i, (0.5 if i < 15 else 0.05) + noise[i]) for i in range(60)]
    v = check_validity(records)
    assert v.steady is not None and not v.steady.steady and not v.steady.moved and v.steady.transient == 15
    assert any("its first 15 requests were a start-up transient (TTFT 49" in w for w in v.warnings), v.warnings
    assert all(r.phase == "measure" for r in records)


def test_only_the_difference_the_clients_lateness_leaves_is_judged() -> None:
    """The same records judged three ways: a head 12 ms slower than a flat 20 ms rest is a transient when the
    client was on time; not one when the client's loop was 15 ms later over the head (the client's lateness
    explains it: a tie); still one when the client was late over the rest instead (lateness cannot make a
    request faster, so it explains none of a slower head). A trend is judged the same way."""
    noise = np.random.default_rng(5).normal(0, 0.0005, 60)

    def run(late_head_ms: float, late_rest_ms: float) -> list[RequestRecord]:
        records = [_record(i, 0.05 * i, (0.032 if i < 15 else 0.02) + noise[i]) for i in range(60)]
        for i, r in enumerate(records):
            r.loop_lag_first_ns = int(1e6 * (late_head_ms if i < 15 else late_rest_ms))
        return records

    assert steady_state(run(0, 0)).transient == 15 and settle(run(0, 0)) == 15
    assert steady_state(run(15, 1)).transient == 0 and settle(run(15, 1)) == 0
    assert steady_state(run(0, 15)).transient == 15
    rising = np.linspace(20, 32, 60)  # ms, a material trend on its own ...
    late = np.linspace(0, 15, 60)  # ... that the client's growing lateness explains
    assert trend(rising) is not None and trend(rising, late) is None and trend(rising, late[::-1]) is not None


def test_a_series_that_starts_at_zero_has_no_relative_trend() -> None:
    """Gaps of 0 ms over the first third (a starved client reads each answer's chunks in one go), then rising: no
    share of 0 can be judged, so no trend is reported, with the client's lateness beside it or not (weighing
    lateness must not turn it into a trend that "rose 0%")."""
    values = np.concatenate([np.zeros(20), np.linspace(0, 10, 40)])
    assert trend(values) is None and trend(values, np.zeros(60)) is None


def test_a_stall_is_flagged_not_absorbed_into_the_warm_up() -> None:
    """Two streams at a time; every stream waits 2.5 s at once right at the start of the measured window (the
    H200 case): the stall would make a transient to MSER-5, but a transient never reaches past the first request
    a stall touched, so nothing is moved and the stall stays in the verdict."""
    records, t = [], 0.0
    for pair in range(30):
        ttft = 2.55 if pair == 0 else 0.05
        records += [_record(2 * pair + i, t, ttft) for i in range(2)]
        t += ttft + 0.091
    assert settle(records) == 0
    v = check_validity(records)
    assert len(v.stalls) == 1 and abs(v.stalls[0].seconds - 2.5) < 0.05 and not v.ok


def test_a_burst_is_not_judged_and_a_wave_sent_together_is_cut_whole() -> None:
    """A burst (every request scheduled at one instant) queues by design: TTFT grows along it, and that is no
    transient. A closed loop's first wave sent together (the simulator's clock: one instant) is cut whole, never
    in the middle of the instant."""
    burst = [_record(i, 0.0, 0.05 * (i + 1)) for i in range(40)]
    for r in burst:
        r.scheduled_ns = burst[0].scheduled_ns
    verdict = steady_state(burst)
    assert not verdict.judged and verdict.unjudged is not None and verdict.unjudged.startswith("a burst")
    assert settle(burst) == 0 and not any("steady" in w for w in check_validity(burst).warnings)
    wave = [_record(i, 0.0, 0.5 if i < 10 else 0.05) for i in range(12)]  # 12 sent together, 10 of them slow
    wave += [_record(12 + i, 1 + 0.1 * i, 0.05) for i in range(48)]
    assert mser5(np.array([(r.chunk_ns[0] - r.sent_ns) / 1e6 for r in wave])) == 10  # inside the instant
    assert settle(wave) == 12 and [r.index for r in wave if r.transient] == list(range(12))
