"""Reference point: the leanest aiohttp streaming loop (closed loop, reads chunks, stamps them, no parsing)."""

import asyncio
import sys
import time

import aiohttp


async def main(url: str, concurrency: int, requests: int) -> None:
    left = [requests]
    body = {"model": "mock", "prompt": "hello " * 64, "max_tokens": 128, "stream": True, "ignore_eos": True}

    async def worker(session: aiohttp.ClientSession) -> None:
        while left[0] > 0:
            left[0] -= 1
            stamps = []
            async with session.post(url + "/v1/completions", json=body) as resp:
                async for _chunk in resp.content.iter_any():
                    stamps.append(time.monotonic_ns())

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
