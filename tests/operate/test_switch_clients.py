"""A blue-green switch meets the connections a load client opened ahead: servetune's own (bench's) client opens
its connections before the clock starts, and nginx's old workers keep the ones no request has come on yet.

Before the fix the old worker answered the first request on each such connection with the old config (blue) for
the whole drain, and cut the one in flight when the drain deadline closed it. Now the switch stops an old worker
once it has no request in flight, so the traffic reaches green within moments of the reload, and bench's client
sends again on a fresh connection a request whose idle connection was closed with nothing answered.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from tests.operate.test_switch_memory import BLUE, MODEL, _argv, _cfg, _switch_cli

from servetune.load.client import Client, Watchdog
from servetune.load.http1 import Pool
from servetune.load.prompts import Conversation, Turn
from servetune.load.runner import _open_connections
from servetune.load.shape import Timeouts
from servetune.metrics.record import RequestRecord

pytestmark = pytest.mark.engine
PREOPENED = 64  # what bench opens for an open-loop run with no concurrency bound
RATE = 3.0
DRAIN_S = 12
TO_GREEN_S = 2.0  # after the reload, a request sent later than this must reach green


async def _bench_load(url: str, duration_s: float) -> list[RequestRecord]:
    """Open-loop streamed completions through bench's HTTP/1.1 client, its connections opened ahead as bench does."""
    pool = Pool(url)
    await _open_connections(pool, PREOPENED, url)
    dog = Watchdog(Timeouts(first_token_s=60, inter_token_s=30, request_s=90))
    client = Client(pool, MODEL, "completions", True, None, None, "ignore_eos", None, False, dog)
    watch = asyncio.ensure_future(dog.run())
    records: list[RequestRecord] = []
    turn = Turn(fields={"prompt": "Hello there", "temperature": 0}, prompt_tokens=None, max_tokens=16)
    t0 = time.monotonic()
    tasks = []
    for i in range(int(RATE * duration_s)):
        await asyncio.sleep(max(0.0, t0 + i / RATE - time.monotonic()))
        now = time.monotonic_ns()
        conv = Conversation(index=i, cls="default", turns=(turn,))
        tasks.append(asyncio.create_task(client.run_conversation(conv, "measure", now, now, records.append)))
    await asyncio.gather(*tasks)
    watch.cancel()
    pool.close()
    return records


def _access_log(path: Path) -> list[tuple[float, str, str]]:
    """(start as wall time, upstream address, status) of each proxied request in serve's nginx access log."""
    rows = []
    for line in path.read_text().splitlines():
        cols = line.split()
        if cols[3] != "-":
            rows.append((float(cols[0]) - float(cols[2]), cols[3], cols[1]))
    return rows


def test_switch_moves_preopened_client_connections_to_green_and_cuts_none(serve, tmp_path: Path) -> None:
    s = serve("--engine", "llamacpp", "--model", "tiny", "--drain", str(DRAIN_S), "--", *_argv(BLUE))
    blue = s.wait_ready()
    green = _cfg(tmp_path, "green", **{**BLUE, "ctx-size": 8192, "parallel": 2})

    async def load_and_switch() -> tuple[list[RequestRecord], subprocess.CompletedProcess[str]]:
        task = asyncio.create_task(_bench_load(s.url, duration_s=DRAIN_S + 24))
        await asyncio.sleep(6)
        done = await asyncio.to_thread(_switch_cli, s.run_dir, green)
        return await task, done

    records, done = asyncio.run(load_and_switch())
    assert done.returncode == 0 and "fits side by side" in done.stderr, done.stderr
    finished = s.wait_event(lambda e: e["event"] == "switch_done")
    ready = s.wait_event(
        lambda e: e["event"] == "state" and e["state"] == "ready" and e["pid"] == finished["green_pid"]
    )
    reloaded = ready["t"]  # emitted once nginx's new workers took the listening socket
    blue_addr = blue["url"].removeprefix("http://")
    rows = _access_log(s.run_dir / "nginx" / "access.log")
    late_to_blue = [r for r in rows if r[1] == blue_addr and r[0] > reloaded + TO_GREEN_S]
    to_green = [r for r in rows if r[1] == finished["green_url"].removeprefix("http://")]
    failed = [(r.error_class, r.error) for r in records if r.error_class is not None]
    print(
        f"\n{len(records)} requests, {len(failed)} failed; to blue more than {TO_GREEN_S} s after the reload: "
        f"{len(late_to_blue)}; old workers gone {finished['drain_s']} s after the reload"
    )
    assert not late_to_blue, late_to_blue[:5]
    assert to_green, "green answered nothing"
    assert not failed, failed[:5]
    assert len(records) == int(RATE * (DRAIN_S + 24))
