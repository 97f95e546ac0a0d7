"""Metric formulas on constructed timelines (no server): vLLM's definitions, exactly."""

from __future__ import annotations

import pytest

from servetune.errors import ServetuneError
from servetune.metrics.record import ErrorClass, RequestRecord
from servetune.metrics.slo import MAX_LATENCY_MS, Slos, parse_slos, slo_problem
from servetune.metrics.summary import Stat, summarize

MS = 1_000_000


def rec(
    index: int, sent_ms: float, chunks_ms: list[float], done_ms: float, n: int | None = None, **kw
) -> RequestRecord:
    return RequestRecord(
        index=index,
        sent_ns=int(sent_ms * MS),
        scheduled_ns=int(kw.pop("scheduled_ms", sent_ms) * MS),
        dispatched_ns=int(kw.pop("dispatched_ms", sent_ms) * MS),
        chunk_ns=[int(c * MS) for c in chunks_ms],
        first_content_ns=int(chunks_ms[0] * MS) if chunks_ms else None,
        done_ns=int(done_ms * MS),
        output_tokens=len(chunks_ms) if n is None else n,
        output_tokens_source="usage",
        output_tokens_requested=kw.pop("requested", len(chunks_ms) if n is None else n),
        prompt_tokens=kw.pop("prompt_tokens", 100),
        prompt_tokens_expected=100,
        finish_reason="length",
        **kw,
    )


def test_ttft_tpot_itl_e2el_follow_vllm_definitions() -> None:
    # request 0: sent at 0, chunks at 50, 60, 75, 85 ms, done at 85: ttft 50, e2el 85, tpot (85-50)/3, gaps 10, 15, 10
    # request 1: sent at 10, chunks at 110, 130, done at 131: ttft 100, e2el 121, tpot (121-100)/1 = 21, gap 20
    s = summarize([rec(0, 0, [50, 60, 75, 85], 85), rec(1, 10, [110, 130], 131)])
    assert s.ttft_ms.mean == pytest.approx(75.0)
    assert s.ttft_ms.min == pytest.approx(50.0) and s.ttft_ms.max == pytest.approx(100.0)
    assert sorted([s.tpot_ms.min, s.tpot_ms.max]) == pytest.approx([35 / 3, 21.0])
    assert s.itl_ms.count == 4  # pooled over requests, not averaged per request
    assert s.itl_ms.mean == pytest.approx((10 + 15 + 10 + 20) / 4)
    assert s.itl_ms.p50 == pytest.approx(12.5)
    assert s.e2el_ms.mean == pytest.approx((85 + 121) / 2)
    assert s.duration_s == pytest.approx(0.131)
    assert s.request_throughput == pytest.approx(2 / 0.131)
    assert s.output_throughput == pytest.approx(6 / 0.131)
    assert s.total_token_throughput == pytest.approx((6 + 200) / 0.131)
    assert s.peak_concurrency == 2


def test_tpot_uses_token_count_not_chunk_count() -> None:
    # 3 chunks carrying 9 tokens (speculative decoding): tpot = (e2el - ttft) / (9 - 1)
    s = summarize([rec(0, 0, [40, 56, 80], 80, n=9)])
    assert s.tpot_ms.mean == pytest.approx(40 / 8)
    assert s.itl_ms.count == 2


def test_single_token_answers_have_no_tpot() -> None:
    s = summarize([rec(0, 0, [30], 30)])
    assert s.tpot_ms.count == 0 and s.ttft_ms.mean == pytest.approx(30)


def test_time_to_first_content_is_apart_from_ttft() -> None:
    r = rec(0, 0, [20, 30, 40, 50], 50)
    r.first_content_ns = 40 * MS  # two reasoning chunks first
    r.reasoning_chunks = 2
    s = summarize([r])
    assert s.ttft_ms.mean == pytest.approx(20) and s.ttfc_ms.mean == pytest.approx(40)


def test_warmup_and_cooldown_are_excluded_and_failures_counted_not_averaged() -> None:
    records = [
        rec(0, 0, [500, 510], 510, phase="warmup"),
        rec(1, 0, [50, 60], 60),
        rec(2, 0, [], 5, error_class=ErrorClass.HTTP_429, http_status=429),
        rec(3, 0, [40], 45, error_class=ErrorClass.TRUNCATED),
        rec(4, 0, [900, 910], 910, phase="cooldown"),
    ]
    s = summarize(records)
    assert s.completed == 1 and s.failed == 2
    assert s.ttft_ms.count == 1 and s.ttft_ms.mean == pytest.approx(50)
    assert s.errors_by_class == {"http_429": 1, "truncated": 1}
    assert s.error_rate == pytest.approx(2 / 3)
    assert s.validity.warmup_excluded == 1 and s.validity.cooldown_excluded == 1
    assert not s.validity.ok and any("failed" in w for w in s.validity.warnings)


def test_goodput_counts_requests_meeting_every_slo() -> None:
    records = [rec(0, 0, [50, 60], 60), rec(1, 0, [150, 160], 160), rec(2, 0, [50, 100], 100)]
    s = summarize(records, slos=Slos(ttft_ms=100, tpot_ms=20))
    assert s.good_requests == 1  # 1 misses ttft, 2 misses tpot (50 ms)
    assert s.goodput == pytest.approx(1 / 0.160)
    assert Slos.parse("ttft:100 tpot:20") == Slos(ttft_ms=100, tpot_ms=20)


@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "0", "-5", str(MAX_LATENCY_MS * 2)])
def test_every_way_of_giving_a_latency_slo_has_one_bound(value: str) -> None:
    """`deploy --slo ttft_p99_ms=1e308` and `--goodput ttft:inf` were accepted; an experiment's slos: were not."""
    with pytest.raises(ServetuneError, match=r"bad --slo 'ttft_p99_ms="):
        parse_slos([f"ttft_p99_ms={value}"])
    with pytest.raises(ServetuneError, match=r"bad SLO"):
        Slos.parse(f"ttft:{value}")
    assert slo_problem("ttft_p99_ms", float(value)) is not None
    assert parse_slos(["ttft_p99_ms=500", "error_rate=0.01"]) == {"ttft_p99_ms": 500.0, "error_rate": 0.01}
    assert Slos.parse(f"ttft:{MAX_LATENCY_MS:.0f}").ttft_ms == MAX_LATENCY_MS


def test_any_percentiles() -> None:
    stat = Stat.of(list(range(1, 1001)), (50, 99.9))
    assert stat.p(99.9) == pytest.approx(999.001)
    assert stat.p50 == pytest.approx(500.5) and stat.p99 == pytest.approx(990.01)


def test_validity_names_short_answers_lateness_and_token_sources() -> None:
    short = rec(0, 0, [10, 20], 20, requested=128)
    short.finish_reason = "stop"
    late = rec(1, 100, [120, 130], 130, scheduled_ms=0, dispatched_ms=100)
    chunks = rec(2, 0, [10, 20], 20)
    chunks.output_tokens_source = "chunks"
    v = summarize([short, late, chunks]).validity
    text = " ".join(v.warnings)
    assert v.short_requests == 1 and "shorter than requested" in text and "stop 1" in text
    assert v.lateness_max_ms == pytest.approx(100) and "late against the schedule" in text
    assert "counted as chunks" in text
    assert v.output_tokens_requested == 128 + 2 + 2 and v.output_tokens_received == 6
