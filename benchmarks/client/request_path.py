#!/usr/bin/env python3
"""One request's work in servetune's client, in process (no sockets, no kernel): CPU per request of the real
`Client` (request bytes, record, SSE parse of a 128-token answer, final facts) with a connection that replays the
recorded answer of `hot_path_response.bin` one chunk per read, of building its conversation (the prompt), and
of its share of the summary. Usage: `python benchmarks/client/request_path.py [--json FILE]`; best of 5 rounds
of 2,000 requests. `ab_device.py` measures the same split on a real socket (`PROFILE.md`, third pass).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from servetune.load.client import Client, Watchdog
from servetune.load.http1 import Pool, _Conn
from servetune.load.prompts import RequestFactory
from servetune.load.shape import Timeouts
from servetune.load.tokens import WordCounter
from servetune.load.workload import Workload
from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import summarize

RESPONSE = Path(__file__).resolve().parent / "hot_path_response.bin"


def chunks(raw: bytes) -> list[bytes]:
    """The head, then one piece per HTTP chunk, as the mock writes them."""
    i = raw.index(b"\r\n\r\n") + 4
    pieces = [raw[:i]]
    while i < len(raw):
        nl = raw.index(b"\r\n", i)
        end = nl + 2 + int(raw[i:nl], 16) + 2
        pieces.append(raw[i:end])
        i = end
    return pieces


class Replay:
    """A transport whose every write is answered, on the next loop turn, by the recorded response."""

    def __init__(self, conn: _Conn, pieces: list[bytes]) -> None:
        self.conn, self.pieces = conn, pieces

    def write(self, data: bytes) -> None:
        asyncio.get_running_loop().call_soon(self._answer)

    def _answer(self) -> None:
        for piece in self.pieces:
            self.conn.data_received(piece)

    def close(self) -> None:
        pass


class ReplayPool(Pool):
    """Hands out replaying connections (kept-alive ones: `used` is set, so no retry logic differs)."""

    def __init__(self, pieces: list[bytes]) -> None:
        super().__init__("http://127.0.0.1:1")
        self.pieces = pieces

    async def acquire(self, *, fresh: bool = False) -> _Conn:
        conn = _Conn(self)
        conn.connection_made(Replay(conn, self.pieces))  # type: ignore[arg-type]
        conn.used = 1
        return conn

    def release(self, conn: _Conn) -> None:
        pass


async def one_round(n: int, pieces: list[bytes]) -> dict[str, float]:
    client = Client(
        ReplayPool(pieces), "mock", "completions", True, None, None, "ignore_eos", None, False, Watchdog(Timeouts())
    )
    factory = RequestFactory(Workload.synthetic(64, 128), WordCounter(), "completions")
    convs = [await factory.conversation(k) for k in range(n)]
    records: list[RequestRecord] = []
    t = time.process_time()
    for conv in convs:
        await client.run_conversation(conv, "measure", 0, 0, records.append)
    request = (time.process_time() - t) / n
    if not all(r.ok and len(r.chunk_ns) == 128 for r in records):
        raise SystemExit(f"a replayed request failed: {records[0]!r}"[:400])
    t = time.process_time()
    summarize(records)
    summary = (time.process_time() - t) / n
    t = time.process_time()
    for k in range(n):
        await factory.conversation(n + k)
    prompt = (time.process_time() - t) / n
    return {"request µs": 1e6 * request, "summary µs": 1e6 * summary, "prompt µs": 1e6 * prompt}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    pieces = chunks(RESPONSE.read_bytes())
    rounds = [asyncio.run(one_round(2000, pieces)) for _ in range(5)]
    best = {key: min(r[key] for r in rounds) for key in rounds[0]}
    print(json.dumps(best))
    if args.json:
        args.json.write_text(json.dumps(best, indent=1))


if __name__ == "__main__":
    main()
