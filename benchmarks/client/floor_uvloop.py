"""Reference point: the floor of a Python client that stamps every read — uvloop, one protocol per connection,
one time stamp per read and nothing else (no parsing, no records). No usable client costs less per token while
reading each token as it arrives; what a client costs above this line is its own work. A fourth argument
`quickack0` asks for delayed ACKs (TCP_QUICKACK 0 before each request: `kernel.py` measures what it changes)."""

import asyncio
import socket
import sys
import time

import uvloop

_now = time.monotonic_ns


class Stream(asyncio.Protocol):
    def __init__(
        self, request: bytes, left: list[int], done: asyncio.Future[None], open_: list[int], quickack0: bool
    ) -> None:
        self.request, self.left, self.done, self.open, self.quickack0 = request, left, done, open_, quickack0
        self.stamps: list[int] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.send()

    def send(self) -> None:
        if self.left[0] <= 0:
            self.transport.close()
            self.open[0] -= 1
            if self.open[0] == 0:
                self.done.set_result(None)
            return
        self.left[0] -= 1
        self.stamps = []
        if self.quickack0:
            self.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
        self.transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.stamps.append(_now())
        if data.endswith(b"0\r\n\r\n"):  # the chunked body's end (the mock streams chunked)
            self.send()


async def main(url: str, concurrency: int, requests: int, quickack0: bool) -> None:
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    body = b'{"model":"mock","prompt":"' + b"hello " * 64 + b'","max_tokens":128,"stream":true,"ignore_eos":true}'
    request = b"POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n" % host.encode()
    request += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    left, open_ = [requests], [concurrency]
    for _ in range(concurrency):
        await loop.create_connection(lambda: Stream(request, left, done, open_, quickack0), host, int(port))
    await done


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] == ["quickack0"]))
