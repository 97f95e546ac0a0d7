"""The engine's split of a load point's TTFT: histograms read as deltas, percentiles by bucket, and the split of
real vLLM 0.24.0 scrapes on an H200 (benchmarks/tuning_table's recorded /metrics around each probe)."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from servetune.metrics.engine_time import engine_time
from servetune.metrics.histogram import Histogram
from servetune.metrics.prometheus import MetricsSnapshot, parse, parse_only, settle
from servetune.metrics.record import RequestRecord

TABLE = Path(__file__).resolve().parents[2] / "benchmarks/tuning_table/data/kv-auto_mnbt-8192_mns-256"
EDGES = (0.3, 0.5, 0.8, 1.0)  # vLLM's first request-phase buckets


def _hist(counts: tuple[float, ...], total: float, s: float) -> Histogram:
    return Histogram(edges=EDGES, cumulative=counts, count=total, sum=s)


def test_a_percentile_is_read_inside_its_bucket_and_says_which() -> None:
    h = _hist((0, 4, 8, 10), 10, 6.0)  # 4 in 0.3-0.5, 4 in 0.5-0.8, 2 in 0.8-1.0; mean 0.6
    p50 = h.quantile(0.5)
    assert p50 is not None and (p50.low, p50.high) == (0.5, 0.8)
    assert p50.value == pytest.approx(0.5 + 0.3 * (5 - 4) / 4)  # the 5th of 10, linear inside its bucket
    assert h.mean == pytest.approx(0.6)


def test_the_mean_bounds_a_percentile_that_the_buckets_cannot() -> None:
    """Queue times of ~0.03 ms all fall in vLLM's first bucket (0-300 ms): interpolation alone says a p50 of
    150 ms; Markov's inequality (p50 <= 2 x mean for times) says at most 0.06 ms."""
    h = _hist((26, 26, 26, 26), 26, 26 * 0.00003)
    p50 = h.quantile(0.5)
    assert p50 is not None and p50.low == 0 and p50.high == pytest.approx(0.00006)
    assert p50.value <= p50.high


def test_beyond_the_last_edge_only_the_mean_bounds_it() -> None:
    h = _hist((0, 0, 0, 1), 10, 95.0)
    p50 = h.quantile(0.5)
    assert p50 is not None and p50.value == 1.0 and p50.low == 1.0 and p50.high == pytest.approx(19.0)  # 2 x mean
    assert h.model_copy(update={"sum": math.inf}).quantile(0.5) == p50.model_copy(update={"high": math.inf})


def test_a_restart_or_other_buckets_give_no_delta() -> None:
    later = _hist((1, 2, 3, 4), 5, 3.0)
    assert later.minus(_hist((2, 2, 3, 4), 5, 1.0)) is None  # a bucket went down: the engine restarted
    assert later.minus(Histogram(edges=(1.0,), cumulative=(1,), count=1, sum=0.5)) is None
    d = later.minus(_hist((1, 1, 1, 1), 1, 0.5))
    assert d is not None and d.cumulative == (0, 1, 2, 3) and d.count == 4 and d.sum == 2.5


def _text(name: str) -> str:
    return gzip.decompress((TABLE / name).read_bytes()).decode()


def _scrape(probe: str, when: str) -> MetricsSnapshot:
    return parse(_text(f"{probe}.metrics.{when}.prom.gz"))


def _records(probe: str) -> list[RequestRecord]:
    return [RequestRecord.model_validate_json(line) for line in _text(f"{probe}.jsonl.gz").splitlines()]


@pytest.mark.parametrize("probe", ["a_tput_r3", "c_tpot_r2"])
def test_real_vllm_0_24_scrapes_split_the_clients_ttft(probe: str) -> None:
    """vLLM 0.24.0's names (`vllm:iteration_tokens_total` is a histogram) read from a real H200 scrape pair; the
    parts add up to the client's mean TTFT over the same requests (every phase), each one where it must be:
    the engine core's queue + prefill inside vLLM's TTFT (the API server's part is positive), vLLM's TTFT inside
    the client's (the HTTP part is positive and small: request parsing, the first chunk's trip, the client)."""
    records = _records(probe)
    split = engine_time(_scrape(probe, "before"), _scrape(probe, "after"), records)
    assert split is not None and split.ttft and split.queue and split.prefill and split.decode
    assert split.ttft.requests == split.prefill.requests == split.client_requests == len(records)
    parts = split.parts()
    assert split.client_ttft_ms == pytest.approx(sum(v for v in parts.values() if v is not None))
    assert split.api_ms is not None and 0 < split.api_ms < 0.2 * split.ttft.mean_ms
    assert split.http_ms is not None and 0 < split.http_ms < 50
    assert split.tokens_per_iteration and split.iterations and split.preemptions == 0
    assert split.prefix_cache_queries == 0 and split.prefix_cache_hit_rate is None  # the hybrid runs without caching
    if probe == "a_tput_r3":  # 128 streams of 512-token prompts under an 8192-token budget: the queue is 45% of it
        assert split.queue.mean_ms > 1000
    else:  # 4 req/s: nothing waits, and the p50 the first bucket holds is bounded by the mean
        assert split.queue.mean_ms < 1 and split.queue.p50 is not None and split.queue.p50.high < 2
    assert "client mean" in split.lines()[0]


def test_a_server_without_vllm_histograms_gives_no_split() -> None:
    text = "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total{} 10\n"
    assert engine_time(parse(text), parse(text), []) is None


def test_gauges_are_read_without_parsing_the_rest() -> None:
    text = _scrape("a_tput_r3", "after")
    full = _text("a_tput_r3.metrics.after.prom.gz")
    snap = parse_only(full, ("vllm:num_requests_running", "vllm:num_requests_waiting"))
    assert snap.names() == {"vllm:num_requests_running", "vllm:num_requests_waiting"}
    assert snap.get("num_requests_running") == text.get("num_requests_running")


async def test_settle_scrapes_again_until_the_engine_has_counted_everything() -> None:
    counts = iter([3.0, 4.0, 5.0])

    def snap(n: float) -> MetricsSnapshot:
        return parse(f"# TYPE x counter\nx_total {n}\n")

    async def again() -> MetricsSnapshot:
        return snap(next(counts))

    got = await settle(again, snap(2.0), lambda s: (s.get("x_total") or 0) < 4)
    assert got.get("x_total") == 4


def test_a_bench_folder_keeps_the_split(tmp_path: Path) -> None:
    from servetune.metrics.runs import BenchRun, RunSource, read_run, write_run

    records = _records("c_tpot_r2")
    split = engine_time(_scrape("c_tpot_r2", "before"), _scrape("c_tpot_r2", "after"), records)
    source = RunSource(tool="servetune", path="", label="x", kind="rate", level=4.0)
    path = write_run(tmp_path, "x", BenchRun.of(source, {}, records).model_copy(update={"engine_time": split}))
    assert read_run(path).engine_time == split


async def test_a_run_against_a_server_without_the_histograms_has_no_split() -> None:
    """The mock server counts tokens and running requests under vLLM's names, but keeps no request-interval
    histograms: the run goes on, its gauges sampled, with no split."""
    from servetune.load.runner import run_load
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Workload
    from servetune.mock.config import MockConfig
    from servetune.mock.server import running

    async with running(MockConfig(ttft_ms=5, itl_ms=5)) as url:
        result = await run_load(url, "mock", Workload.synthetic(16, 4), LoadShape.closed(2, requests=4), workers=1)
    assert result.summary.completed == 4 and result.engine_time is None
