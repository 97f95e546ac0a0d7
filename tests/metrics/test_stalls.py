"""Server stalls in the validity verdict: a pause of every stream is flagged with when and how long; one slow
stream, ordinary jitter and a wave of prefills are not."""

from __future__ import annotations

from servetune.load.runner import run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.record import RequestRecord
from servetune.metrics.stalls import find_stalls
from servetune.metrics.validity import check_validity
from servetune.mock.config import Fault, MockConfig
from servetune.mock.server import running

W = Workload.synthetic(16, 32)
SHAPE = LoadShape.closed(8, requests=48, warmup_requests=8)


async def test_a_server_pause_mid_run_is_flagged_with_its_time_and_length() -> None:
    """Every stream of the mock stops for 2 s, 1.2 s after the first request: the one stall found starts there
    and lasts that long, touches the 8 streams in flight, and the run is not valid."""
    async with running(MockConfig(ttft_ms=50, itl_ms=10, pause_at_s=1.2, pause_s=2.0)) as url:
        result = await run_load(url, "mock", W, SHAPE)
    v = result.summary.validity
    assert len(v.stalls) == 1, v.stalls
    stall = v.stalls[0]
    assert 1.0 < stall.at_s < 1.45 and 1.8 < stall.seconds < 2.3, stall
    assert stall.requests == 8 and stall.measured >= 1
    assert not v.ok and any("the server stalled 1 time in the measured window" in w for w in v.warnings)


async def test_an_ordinary_run_and_one_slow_stream_are_no_stall() -> None:
    """One request of the run waits 2 s between two tokens (a slow stream): the other seven streams go on
    receiving tokens, so the server did not stall."""
    async with running(MockConfig(ttft_ms=50, itl_ms=10)) as url:
        plain = await run_load(url, "mock", W, SHAPE)
    slow = MockConfig(ttft_ms=50, itl_ms=10, faults=(Fault(kind="stall", after=5, seconds=2.0, every=20),))
    async with running(slow) as url:
        one = await run_load(url, "mock", W, SHAPE)
    assert max(r.max_itl_ns or 0 for r in one.records) > 1.9e9  # the slow stream was there
    for result in (plain, one):  # (other warnings may come from a loaded machine: the client's, not a stall)
        v = result.summary.validity
        assert v.stalls == [] and not any("stalled" in w for w in v.warnings), v.warnings


def _stream(index: int, sent_s: float, first_s: float, itl_s: float, n: int, prompt: int = 16) -> RequestRecord:
    """A streamed request, its times in seconds from 1 s."""
    chunks = [int((1 + first_s + k * itl_s) * 1e9) for k in range(n)]
    return RequestRecord(
        index=index,
        sent_ns=int((1 + sent_s) * 1e9),
        chunk_ns=chunks,
        done_ns=chunks[-1] + 1000,
        output_tokens=n,
        prompt_tokens=prompt,
        prompt_tokens_expected=prompt,
    )


def test_a_stall_at_a_wave_start_is_seen_and_a_wave_of_prefills_is_not() -> None:
    """Closed-loop waves in lock step: each wave's 4 requests are sent together and prefilled together (0.3 s
    against 10 ms ITLs) — no stall; when one wave's first tokens come 2.5 s late instead (the H200 MoE case), the
    stall is found with its length measured from when the prefill was due, not from the send."""

    def waves(late: float) -> list[RequestRecord]:
        records, t = [], 0.0
        for wave in range(6):
            ttft = 0.3 + (late if wave == 3 else 0.0)
            records += [_stream(4 * wave + i, t, t + ttft, 0.01, 50) for i in range(4)]
            t += ttft + 0.49 + 0.001
        return records

    assert find_stalls(waves(0.0)) == []
    [stall] = find_stalls(waves(2.5))
    assert abs(stall.seconds - 2.5) < 0.01 and stall.requests == 4
    assert check_validity(waves(0.0)).ok and not check_validity(waves(2.5)).ok


def test_one_stream_alone_and_a_long_prompt_are_no_stall() -> None:
    """A request alone in flight that waits 3 s is a slow request, not a stalled server; two long prompts prefilled
    together take longer than the run's short ones in proportion to their length."""
    alone = [_stream(0, 0.0, 0.05, 0.01, 20), _stream(1, 1.0, 4.0, 0.01, 20)]
    assert find_stalls(alone) == []
    short = [_stream(i, 0.3 * i, 0.3 * i + 0.05, 0.01, 20) for i in range(10)]
    long = [_stream(10 + i, 3.5, 3.5 + 2.0, 0.01, 20, prompt=16 * 60) for i in range(2)]
    assert find_stalls(short + long) == []
