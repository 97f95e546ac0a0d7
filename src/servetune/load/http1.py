"""A lean HTTP/1.1 client on asyncio protocols, for the streaming hot path.

Why not aiohttp here: a streamed token costs aiohttp ~25-35 µs of client CPU on this machine (parser, stream
reader, one coroutine wake-up per chunk), which is more than the budget of a client that must run beside the
server. This protocol does the whole job inside `data_received`: it stamps the arrival time first, decodes
chunked transfer encoding with `bytes.find` and hands body bytes to a sink; no task wakes until the response
ends. Connections are kept alive and reused per (host, port). aiohttp is still used for everything that is
not hot (`/tokenize`, `/metrics`, `/v1/models`).

Why not httptools (llhttp, in C): it frames a chunk in ~0.2 µs but then calls back into Python per chunk, and
the one-chunk read this parser recognises by comparing its size line with the previous one costs about the same
with no callback; the SSE scan that follows is the larger part either way (benchmarks/client/PROFILE.md).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

_now = time.monotonic_ns


class BodySink(Protocol):
    """Receives a response: the status and headers, body bytes with their arrival time, then the end."""

    def on_head(self, status: int, headers: dict[str, str]) -> None: ...

    def on_body(self, data: bytes, now_ns: int, lo: int = 0, hi: int = -1) -> None: ...


class ResponseError(Exception):
    """The response broke off. `kind` is one of: reset, truncated, invalid."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_HEAD, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _LENGTH, _UNTIL_CLOSE, _IDLE = range(7)


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.state = _IDLE
        self.buf = b""
        self.remaining = 0
        self.keep_alive = True
        self.sink: BodySink | None = None
        self.done: asyncio.Future[None] | None = None
        self.last_ns = 0  # arrival time of the latest bytes (the watchdog reads it)
        self.closed = False
        self.pooled = False
        """Taken from the idle pool (kept alive after an answer, or opened before the run): the server may have
        closed it meanwhile, so a request on it that gets nothing back may be sent again on a fresh one."""
        self.size_line = b"\x00"  # the last chunk-size line (e.g. b"c3\r\n") and its value: the fast path's guess
        self.size = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.state == _UNTIL_CLOSE and exc is None:
            self._finish()
        elif self.done is not None and not self.done.done():
            if exc is None:
                self.done.set_exception(ResponseError("truncated", "server closed the connection mid-response"))
            else:
                self.done.set_exception(ResponseError("reset", f"connection lost: {exc!r}"))
            self.done = None

    def request(self, data: bytes, sink: BodySink) -> asyncio.Future[None]:
        self.sink = sink
        self.state = _HEAD
        self.buf = b""
        self.done = asyncio.get_running_loop().create_future()
        self.last_ns = _now()
        assert self.transport is not None
        self.transport.write(data)
        return self.done

    def abort(self, error: BaseException) -> None:
        """Gives up on the in-flight response (a timeout): fails it and drops the connection."""
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)
        self.done = None
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _finish(self) -> None:
        self.state = _IDLE
        self.sink = None
        done, self.done = self.done, None
        if done is not None and not done.done():
            done.set_result(None)
        if self.keep_alive and not self.closed and not self.buf:
            self.pool.release(self)
        elif not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()

    def _fail(self, message: str) -> None:
        self.abort(ResponseError("invalid", message))

    def data_received(self, data: bytes) -> None:
        now = _now()
        self.last_ns = now
        state = self.state
        sink = self.sink
        if state == _CHUNK_SIZE and not self.buf and sink is not None:
            # The common case: exactly one whole chunk in this read, nothing pending. Its size line is usually
            # the previous chunk's (the tokens of one stream are alike), so it is compared, not parsed.
            line = self.size_line
            if data.startswith(line):
                lo = len(line)
                hi = lo + self.size
            else:
                nl = data.find(b"\r", 0, 12)
                try:
                    size = int(data[:nl], 16) if nl > 0 and data[nl + 1 : nl + 2] == b"\n" else 0
                except ValueError:
                    size = 0
                lo, hi = nl + 2, nl + 2 + size
                if size:
                    self.size_line, self.size = data[:lo], size
            if hi > lo and len(data) == hi + 2:
                sink.on_body(data, now, lo, hi)
                return
            buf = data
        else:
            buf = self.buf + data
        self.buf = b""
        if sink is None:
            return
        pos = 0
        end = len(buf)
        while pos < end:
            if state == _CHUNK_SIZE:
                if buf.startswith(self.size_line, pos):  # the size line seen last: compared, not parsed
                    pos += len(self.size_line)
                    self.remaining = self.size
                    state = _CHUNK_DATA
                    continue
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    break
                try:
                    size = int(buf[pos:nl], 16)
                except ValueError:
                    try:
                        size = int(buf[pos:nl].split(b";", 1)[0], 16)  # a chunk extension
                    except ValueError:
                        return self._fail(f"bad chunk size line {buf[pos:nl][:40]!r}")
                if size:
                    self.size_line, self.size = buf[pos : nl + 2], size
                if size == 0:
                    term = buf.find(b"\r\n\r\n", nl)  # optional trailers, then an empty line
                    if term < 0 and buf[nl + 2 : nl + 4] != b"\r\n":
                        break
                    self.state = state
                    return self._finish()
                pos = nl + 2
                self.remaining = size
                state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                need = self.remaining
                if end - pos >= need:
                    sink.on_body(buf, now, pos, pos + need)  # each chunk as it is: usually one whole event
                    pos += need
                    state = _CHUNK_CRLF
                else:
                    sink.on_body(buf, now, pos, end)
                    self.remaining = need - (end - pos)
                    pos = end
            elif state == _CHUNK_CRLF:
                if end - pos < 2:
                    break
                pos += 2
                state = _CHUNK_SIZE
            elif state == _LENGTH:
                take = min(self.remaining, end - pos)
                sink.on_body(buf, now, pos, pos + take)
                self.remaining -= take
                pos += take
                if self.remaining == 0:
                    self.state = state
                    return self._finish()
            elif state == _UNTIL_CLOSE:
                sink.on_body(buf, now, pos, end)
                pos = end
            elif state == _HEAD:
                he = buf.find(b"\r\n\r\n", pos)
                if he < 0:
                    break
                after = self._head(buf[pos:he], sink)
                if after is None:
                    return
                state = after
                pos = he + 4
                if state == _LENGTH and self.remaining == 0:
                    self.state = state
                    return self._finish()
            else:  # bytes while idle: the server broke the protocol
                return self._fail("bytes received with no request in flight")
        self.state = state
        if pos < end:
            self.buf = buf[pos:]

    def _head(self, head: bytes, sink: BodySink) -> int | None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            self._fail(f"bad status line {lines[0][:60]!r}")
            return None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.keep_alive = headers.get("connection", "").lower() != "close" and parts[0] != "HTTP/1.0"
        sink.on_head(status, headers)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return _CHUNK_SIZE
        if "content-length" in headers:
            self.remaining = int(headers["content-length"])
            return _LENGTH
        self.keep_alive = False
        return _UNTIL_CLOSE


class Pool:
    """Keep-alive connections to one server, created on demand (no limit: the load shape limits concurrency)."""

    def __init__(self, base_url: str, connect_timeout_s: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            from servetune.errors import ServetuneError

            raise ServetuneError(f"base URL {base_url!r} is not an http(s) URL", "use e.g. http://127.0.0.1:8000")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        self.host_header = parts.netloc
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[_Conn] = []
        self.all: set[_Conn] = set()

    async def acquire(self, *, fresh: bool = False) -> _Conn:
        """A kept-alive idle connection, or a new one (always new with `fresh`: a retry must not meet another
        connection the server has already given up on)."""
        while self._idle and not fresh:
            conn = self._idle.pop()
            if not conn.closed:
                conn.pooled = True
                return conn
            self.all.discard(conn)
        loop = asyncio.get_running_loop()
        factory: Callable[[], _Conn] = lambda: _Conn(self)  # noqa: E731
        _, conn = await asyncio.wait_for(
            loop.create_connection(factory, self.host, self.port, ssl=self.ssl), self.connect_timeout_s
        )
        self.all.add(conn)
        return conn

    def release(self, conn: _Conn) -> None:
        self._idle.append(conn)

    def close(self) -> None:
        for conn in self.all:
            if conn.transport is not None:
                conn.transport.close()
        self.all.clear()
        self._idle.clear()

    def build(self, path: str, body: bytes, extra_headers: str = "") -> bytes:
        """The bytes of one POST request (built once, before it is scheduled)."""
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream, application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra_headers}\r\n"
        )
        return head.encode("latin-1") + body
