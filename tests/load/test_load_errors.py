"""Every error class, produced by a real misbehaving server over a real socket, is counted under its class."""

from __future__ import annotations

import asyncio

import pytest

from servetune.errors import ServetuneError
from servetune.load.runner import run_load
from servetune.load.shape import LoadShape, Timeouts
from servetune.load.workload import Workload
from servetune.metrics.record import ErrorClass
from servetune.mock.config import Fault, MockConfig
from servetune.mock.server import running

FAST = MockConfig(ttft_ms=5, itl_ms=1)
WORKLOAD = Workload.synthetic(16, 8)


async def _one(fault: dict, *, stream: bool = True, timeouts: Timeouts | None = None, endpoint: str = "completions"):
    async with running(FAST) as url:
        shape = LoadShape.closed(1, requests=1, timeouts=timeouts or Timeouts())
        result = await run_load(
            url, "mock", WORKLOAD, shape, stream=stream, extra_body={"mock_fault": fault}, endpoint=endpoint
        )  # type: ignore[arg-type]
    [record] = result.records
    return record, result.summary


@pytest.mark.parametrize(
    ("fault", "expected", "status"),
    [
        ({"kind": "error_event", "after": 3}, ErrorClass.ERROR_EVENT, 200),
        ({"kind": "truncate", "after": 3}, ErrorClass.TRUNCATED, 200),
        ({"kind": "reset", "after": 3}, ErrorClass.CONNECTION_RESET, 200),
        ({"kind": "status", "status": 429}, ErrorClass.HTTP_429, 429),
        ({"kind": "status", "status": 500}, ErrorClass.HTTP_5XX, 500),
        ({"kind": "status", "status": 400}, ErrorClass.HTTP_4XX, 400),
        ({"kind": "invalid_utf8", "after": 2}, ErrorClass.INVALID_RESPONSE, 200),
    ],
)
async def test_fault_is_classified(fault: dict, expected: ErrorClass, status: int) -> None:
    record, summary = await _one(fault)
    assert record.error_class == expected, record.error
    assert record.http_status == status
    assert summary.failed == 1 and summary.completed == 0
    assert summary.errors_by_class == {str(expected): 1}
    assert summary.ttft_ms.count == 0  # a failed request never enters the latency figures


async def test_chunks_before_a_mid_stream_failure_are_kept_on_the_record() -> None:
    record, _ = await _one({"kind": "error_event", "after": 3})
    assert len(record.chunk_ns) == 3 and record.error and "mock error event" in record.error


async def test_first_token_timeout() -> None:
    record, _ = await _one({"kind": "stall", "after": 0, "seconds": 30}, timeouts=Timeouts(first_token_s=0.3))
    assert record.error_class == ErrorClass.FIRST_TOKEN_TIMEOUT
    assert 0.25 < record.e2el_ns / 1e9 < 2


async def test_inter_token_timeout() -> None:
    record, _ = await _one({"kind": "stall", "after": 4, "seconds": 30}, timeouts=Timeouts(inter_token_s=0.3))
    assert record.error_class == ErrorClass.INTER_TOKEN_TIMEOUT
    assert len(record.chunk_ns) == 4


async def test_a_short_stall_is_not_an_error_but_shows_in_itl() -> None:
    record, summary = await _one({"kind": "stall", "after": 4, "seconds": 0.2})
    assert record.ok and summary.itl_ms.max > 190


async def test_non_streamed_error_status() -> None:
    record, _ = await _one({"kind": "status", "status": 503}, stream=False)
    assert record.error_class == ErrorClass.HTTP_5XX and "503" in (record.error or "")


async def test_early_eos_is_valid_but_flagged() -> None:
    record, summary = await _one({"kind": "early_eos", "after": 3})
    assert record.ok and record.finish_reason == "stop" and record.output_tokens == 3
    assert summary.validity.short_requests == 1 and not summary.validity.ok


async def test_missing_usage_falls_back_to_chunks() -> None:
    record, summary = await _one({"kind": "drop_usage"})
    assert record.ok and record.output_tokens_source == "chunks" and record.output_tokens == 8
    assert any("counted as chunks" in w for w in summary.validity.warnings)


async def test_server_wide_faults_hit_every_nth_request() -> None:
    config = MockConfig(ttft_ms=2, itl_ms=1, faults=(Fault(kind="status", status=429, every=4),))
    async with running(config) as url:
        result = await run_load(url, "mock", WORKLOAD, LoadShape.closed(2, requests=20))
    assert result.summary.errors_by_class == {"http_429": 5}
    assert result.summary.completed == 15


async def test_refused_connection_is_a_user_error() -> None:
    with pytest.raises(ServetuneError) as err:
        await run_load("http://127.0.0.1:1", "mock", WORKLOAD, LoadShape.closed(1, requests=1), tokenizer="words")
    assert "cannot connect" in err.value.problem and err.value.fix


def test_fault_parse() -> None:
    assert Fault.parse("status:status=429:every=10") == Fault(kind="status", status=429, every=10)
    with pytest.raises(ServetuneError):
        Fault.parse("explode")


async def test_a_server_that_closes_kept_alive_connections_loses_no_request() -> None:
    """llama.cpp's server (xllamacpp) closes the connection after every streamed answer while advertising
    keep-alive: a request sent on such a connection gets no byte back and is sent again on a new one."""
    config = MockConfig(ttft_ms=2, itl_ms=0.2, faults=(Fault(kind="close_after"),))
    async with running(config) as url:  # 16 streams: several dead connections wait in the pool at once
        result = await run_load(url, "mock", Workload.synthetic(16, 8), LoadShape.closed(16, requests=160))
    # every request answered, wherever the steady-state rule put it (a loaded machine's client delays on a 2 ms
    # mock can move the first ones to warm-up: 130 measured + 30 moved once)
    assert sum(r.ok for r in result.records) == 160 and result.summary.failed == 0


async def test_a_connection_opened_ahead_and_closed_unanswered_is_sent_again() -> None:
    """The connections bench opens before the clock starts wait in the pool like kept-alive ones, and a server may
    close them just as the first request goes out (a proxy's old worker stopped by a reload: operate's switch):
    nothing was answered, so the request is sent again on a fresh connection, not failed."""
    opened_ahead = 4
    load_started = False
    closed_unanswered = 0

    async def front(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal load_started, closed_unanswered
        ahead = not load_started  # opened before any generation was asked for: the run's own, opened ahead
        first = await reader.read(65536)
        if first.startswith(b"POST /v1/completions"):
            load_started = True
            if ahead:
                closed_unanswered += 1
                writer.close()
                return
        up_reader, up_writer = await asyncio.open_connection(host, port)
        up_writer.write(first)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    async with running(FAST) as url:
        host, _, port = url.removeprefix("http://").rpartition(":")
        server = await asyncio.start_server(front, "127.0.0.1", 0)
        front_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            result = await run_load(front_url, "mock", WORKLOAD, LoadShape.closed(opened_ahead, requests=12))
    assert closed_unanswered == opened_ahead
    assert result.summary.completed == 12 and result.summary.failed == 0, result.summary.errors_by_class
