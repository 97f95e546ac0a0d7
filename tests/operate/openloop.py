"""An open-loop load for the operate tests and benchmark: requests at a constant rate whatever the answers.

Each request is a streamed completion; it is recorded as answered (HTTP 200 with its `[DONE]`), refused
(an HTTP error status: the proxy's fast 502/503) or broken (connection error, cut stream, timeout), with its
times.  Every request has a hard timeout, so a load never hangs a test.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp


@dataclass
class Outcome:
    sent: float
    done: float = 0.0
    status: int | None = None
    kind: str = "broken"  # answered | refused | broken
    detail: str = ""
    tokens: int = 0
    first: float | None = None

    @property
    def seconds(self) -> float:
        return self.done - self.sent


@dataclass
class LoadResult:
    outcomes: list[Outcome] = field(default_factory=list)

    def of(self, kind: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == kind]


async def one(
    session: aiohttp.ClientSession, url: str, body: dict, timeout_s: float, streaming: asyncio.Event | None = None
) -> Outcome:
    """One streamed completion; `streaming` is set at its first token (a test that acts on streams in flight waits
    for it: a request still in the kernel's or the proxy's queue on a loaded machine is not in flight yet)."""
    out = Outcome(sent=time.monotonic())
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url + "/v1/completions", json=body) as resp:
                out.status = resp.status
                if resp.status != 200:
                    out.detail = (await resp.text())[:200]
                    out.kind = "refused"
                    return out
                finished = False
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        finished = True
                        break
                    chunk = json.loads(data)
                    if chunk.get("choices") and chunk["choices"][0].get("text"):
                        out.tokens += 1
                        out.first = out.first or time.monotonic()
                        if streaming is not None:
                            streaming.set()
                out.kind = "answered" if finished else "broken"
                out.detail = "" if finished else "stream ended without [DONE]"
    except (aiohttp.ClientError, TimeoutError, ValueError) as err:
        out.kind, out.detail = "broken", f"{type(err).__name__}: {err}"
    finally:
        out.done = time.monotonic()
    return out


async def run(
    url: str,
    *,
    rate: float,
    duration_s: float,
    model: str,
    max_tokens: int = 8,
    prompt: str = "Hello there",
    timeout_s: float = 30.0,
    force_close: bool = False,
) -> LoadResult:
    """Sends `rate` requests per second for `duration_s` (constant spacing) and waits for every answer."""
    result = LoadResult()
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0}
    conn = aiohttp.TCPConnector(limit=0, force_close=force_close)
    async with aiohttp.ClientSession(connector=conn) as session:
        tasks = []
        t0 = time.monotonic()
        n = int(rate * duration_s)
        for i in range(n):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(session, url, body, timeout_s)))
        result.outcomes = list(await asyncio.gather(*tasks))
    return result
