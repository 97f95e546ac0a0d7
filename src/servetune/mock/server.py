"""`servetune mock-server`: a fast OpenAI-compatible streaming server with fixed TTFT and ITL.

Written on raw asyncio protocols with pre-encoded chunks (no web framework) because it must stay far cheaper
than the clients it measures: one streamed token costs one timer and one `write` of bytes built once per
request. Tokens are words: the prompt's token count is its number of whitespace-separated words (also what
its `/tokenize` answers), and every output token is the text " tok".

Endpoints: POST /v1/completions, /v1/chat/completions (stream or not), /tokenize; GET /v1/models, /health,
/metrics (vLLM's metric names, so the Prometheus reader can be tested against it); GET /mock/ttft, the server's
own TTFT of every streamed request (request received → first chunk written, the truth a client's TTFT is
compared with; DELETE clears it).

"Received" is the kernel's receive time where the server can read it, not the moment its loop got round to the
socket: a loaded one-core server leaves requests waiting in their sockets for milliseconds, and a truth that
starts at the read cannot see that wait, so it would be blamed on the client being measured (+3.6 to
+5.5 ms of "client error" with the clients on time). In `precise` mode on asyncio's own loop the sockets carry
SO_TIMESTAMPNS and are read with `recvmsg` (`_StampingSocket`); the answer's schedule and the TTFT both count
from that stamp, and /mock/ttft says so (`"origin": "kernel"`) with each request's wait in its socket. uvloop
reads in C (no ancillary data reaches Python), and coarse mode is for cost, not truth: both count from the read
(`"origin": "read"`).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from servetune.errors import ServetuneError
from servetune.mock.args import MockServerArgs
from servetune.mock.config import Fault, MockConfig
from servetune.process.interrupts import run_coroutine

_TOKEN = " tok"
_BAD_UTF8 = b" \xff\xfe"
_BLOCK = 16  # words per prefix-cache block in the mock's hit counter
_SO_TIMESTAMPNS = 35  # SO_TIMESTAMPNS_OLD on Linux: the socket module does not name it


def _count_words(body: dict) -> int:
    """The mock tokenizer: one token per whitespace-separated word of the prompt or of each message."""
    if "messages" in body:
        return sum(len(str(m.get("content") or "").split()) for m in body["messages"])
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return len(prompt) if prompt and isinstance(prompt[0], int) else sum(len(p.split()) for p in prompt)
    return len(str(prompt).split())


def _prompt_words(body: dict) -> list[str]:
    if "messages" in body:
        return " ".join(str(m.get("content") or "") for m in body["messages"]).split()
    prompt = body.get("prompt", "")
    return prompt.split() if isinstance(prompt, str) else [str(p) for p in prompt]


class _Stats:
    """Counters exposed at /metrics under vLLM's names."""

    def __init__(self) -> None:
        self.running = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished: dict[str, int] = {}
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.requests = 0
        self._blocks: set[int] = set()
        self.ttft_ms: list[float] = []  # the server's own TTFT of each streamed request: arrival → first chunk written
        self.socket_wait_ms: list[float] = []  # kernel receive → the loop's read, beside each TTFT (kernel origin)
        self.origin = "read"  # where the arrival was stamped: "kernel" once a request came with the kernel's stamp

    def count_prefix(self, words: list[str]) -> None:
        """vLLM-style block hashing: a block hits when the same block, after the same prefix, was seen."""
        if len(self._blocks) > 1_000_000:
            self._blocks.clear()
        self.prefix_queries += len(words)
        h = 0
        hits_open = True
        for start in range(0, len(words) - len(words) % _BLOCK, _BLOCK):
            h = hash((h, tuple(words[start : start + _BLOCK])))
            if hits_open and h in self._blocks:
                self.prefix_hits += _BLOCK
            else:
                hits_open = False
                self._blocks.add(h)

    def render(self, model: str) -> bytes:
        labels = f'engine="0",model_name="{model}"'
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} {self.running}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{labels}}} 0",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{labels}}} {min(1.0, self.running / 256):.4f}",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{labels}}} {self.prompt_tokens}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{labels}}} {self.generation_tokens}",
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{{{labels}}} {self.prefix_queries}",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{{{labels}}} {self.prefix_hits}",
            "# TYPE vllm:num_preemptions_total counter",
            f"vllm:num_preemptions_total{{{labels}}} 0",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason, n in sorted(self.finished.items()):
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {n}')
        return ("\n".join(lines) + "\n").encode()


class _StampingSocket(socket.socket):
    """A socket whose `recv` is a `recvmsg` that keeps the kernel's receive stamp of the data (SO_TIMESTAMPNS),
    on the loop's clock. asyncio's selector transports read through the socket object they were given, so a
    listening socket of this class hands the transports of its connections sockets of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamp = 0.0  # loop-clock time of the last read's data, 0 when the read came without a stamp
        self.accepted: dict[int, _StampingSocket] = {}  # a listener's: accepted, not yet connected, by fd

    def accept(self) -> tuple[socket.socket, Any]:
        fd, addr = self._accept()  # type: ignore[attr-defined]
        conn = _StampingSocket(self.family, self.type, self.proto, fileno=fd)
        conn.setblocking(False)
        self.accepted[fd] = conn  # the connection's protocol takes it from here (uvloop never calls this)
        return conn, addr

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(bufsize, 64, flags)
        self.stamp = 0.0
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", raw[:16])
                self.stamp = sec + nsec / 1e9 - (time.time() - time.monotonic())  # realtime → the loop's clock
        return data


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk holding one SSE event."""
    event = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


_DONE = _frame(b"[DONE]") + b"0\r\n\r\n"
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _response(status: int, body: bytes, content_type: bytes = b"application/json") -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found", 429: b"Too Many Requests"}.get(
        status, b"Error"
    )
    return b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        status,
        reason,
        content_type,
        len(body),
        body,
    )


def _error_body(status: int, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "MockError", "code": status}}).encode()


class _Stream:
    """One streamed answer: sends token k at arrival + ttft + k·itl (absolute schedule, so lateness never adds up)."""

    def __init__(self, conn: _Connection, body: dict, chat: bool, fault: Fault | None, arrival: float) -> None:
        cfg = conn.server.config
        self.conn, self.fault, self.chat = conn, fault, chat
        self.n = int(body.get("max_tokens") or body.get("max_completion_tokens") or cfg.output_tokens)
        self.finish = "length"
        if fault is not None and fault.kind == "early_eos":
            self.n, self.finish = min(self.n, max(fault.after, 1)), "stop"
        opts = body.get("stream_options") or {}
        self.usage = bool(opts.get("include_usage")) and not (fault is not None and fault.kind == "drop_usage")
        self.prompt_tokens = _count_words(body)
        self.reasoning = min(cfg.reasoning_tokens, self.n) if chat else 0
        self.arrival, self.socket_wait = arrival, conn.socket_wait
        self.t0 = arrival + cfg.ttft_s(conn.server.stats.requests - 1)
        self.itl = cfg.itl_ms / 1e3
        self.k = 0
        self.stalled = False
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{conn.server.stats.requests}"
        kind = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())
        self.head = (
            f'{{"id":"{rid}","object":"{kind}","created":{created},"model":"{cfg.model}","choices":[{{"index":0,'
        )
        self.normal = self._chunk(_TOKEN, None)
        self.thinking = self._chunk(_TOKEN, None, reasoning=True) if self.reasoning else b""

    def _chunk(self, text: str, finish: str | None, reasoning: bool = False, role: bool = False) -> bytes:
        fin = "null" if finish is None else f'"{finish}"'
        if self.chat:
            key = "reasoning_content" if reasoning else "content"
            delta = f'"role":"assistant","{key}":{json.dumps(text)}' if role else f'"{key}":{json.dumps(text)}'
            payload = f'{self.head}"delta":{{{delta}}},"logprobs":null,"finish_reason":{fin}}}]}}'
        else:
            payload = (
                f'{self.head}"text":{json.dumps(text)},"logprobs":null,"finish_reason":{fin},"stop_reason":null}}]}}'
            )
        return _frame(payload.encode())

    def start(self) -> None:
        self.conn.transport.write(_STREAM_HEAD)
        self._next()

    def _next(self) -> None:
        """Schedules token `k` at t0 + k·itl; one due in the server's pause leaves when the pause ends, and the
        stream's later tokens move by as much (the engine did no step meanwhile)."""
        due = self.t0 + self.k * self.itl
        pause = self.conn.server.pause()
        if pause is not None and pause[0] <= due < pause[1]:
            self.t0 += pause[1] - due
            due = pause[1]
        self.conn.server.schedule(due, self._tick)

    def _tick(self) -> None:
        conn = self.conn
        if conn.closed:
            return
        fault, k = self.fault, self.k
        if fault is not None and k == fault.after:
            kind = fault.kind
            if kind == "stall" and not self.stalled:
                self.stalled = True
                self.t0 += fault.seconds
                self._next()
                return
            if kind == "error_event":
                err = json.dumps({"error": {"message": "mock error event", "type": "InternalServerError", "code": 500}})
                conn.transport.write(_frame(err.encode()) + _DONE)
                return conn.finish_response("error")
            if kind == "truncate":
                conn.transport.close()
                return conn.finish_response("abort")
            if kind == "reset":
                conn.reset()
                return conn.finish_response("abort")
        if k == 0:
            stats = conn.server.stats
            stats.ttft_ms.append(1e3 * (conn.server.loop.time() - self.arrival))
            if stats.origin == "kernel":
                stats.socket_wait_ms.append(1e3 * self.socket_wait)
        if k == 0 and self.chat:
            conn.transport.write(self._chunk("", None, role=True))
        last = k == self.n - 1
        if last:
            conn.transport.write(self._chunk(_TOKEN, self.finish, reasoning=k < self.reasoning))
        elif fault is not None and fault.kind == "invalid_utf8" and k == fault.after:
            conn.transport.write(_frame(self.normal[self.normal.index(b"{") : -4].replace(_TOKEN.encode(), _BAD_UTF8)))
        else:
            conn.transport.write(self.thinking if k < self.reasoning else self.normal)
        conn.server.stats.generation_tokens += 1
        self.k = k + 1
        if not last:
            self._next()
            return
        if self.usage:
            usage: dict[str, Any] = {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.n,
                "total_tokens": self.prompt_tokens + self.n,
            }
            if self.reasoning:
                usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
            head = self.head[: self.head.index(',"choices"')]
            conn.transport.write(_frame(f'{head},"choices":[],"usage":{json.dumps(usage)}}}'.encode()))
        conn.transport.write(_DONE)
        conn.finish_response(self.finish)
        if self.fault is not None and self.fault.kind == "close_after":
            conn.close_soon()


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests on it are answered one after another."""

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.buf = b""
        self.busy = False
        self.closed = False
        self.t_in = 0.0
        self.wait_in = 0.0  # how long the request's first bytes waited in the socket (kernel stamps only)
        self.socket_wait = 0.0  # that, for the request being answered
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self.stamping: _StampingSocket | None = None
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.stamping = self.server.stamping.pop(sock.fileno(), None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.busy:
            self.finish_response("abort")
        self.closed = True

    def reset(self) -> None:
        """Aborts with RST (SO_LINGER 0), the way a crashed proxy or engine drops a connection."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def close_soon(self) -> None:
        """Takes no more requests and closes a moment later: a client that reuses the connection meanwhile
        has its request swallowed, as with llama.cpp's server."""
        self.closed = True
        self.server.loop.call_later(0.02, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.buf:
            self.t_in = self.server.loop.time()  # the request's arrival: TTFT counts from its first bytes
            stamp = self.stamping.stamp if self.stamping is not None else 0.0
            if stamp > 0:
                self.server.stats.origin = "kernel"
                self.wait_in = max(0.0, self.t_in - stamp)
                self.t_in = min(stamp, self.t_in)
        self.buf += data
        self._next_request()

    def _next_request(self) -> None:
        while not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            auth = ""
            for line in head[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "authorization":
                    auth = value.strip()
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path, *_ = head[0].split(" ")
            self.busy = True
            arrival, self.socket_wait = self.t_in, self.wait_in
            self.t_in, self.wait_in = self.server.loop.time(), 0.0  # a pipelined request behind it arrived by now
            self.server.handle(self, method, path.split("?")[0], body, auth, arrival)

    def send(self, data: bytes) -> None:
        self.transport.write(data)
        self.busy = False
        self._next_request()

    def finish_response(self, reason: str) -> None:
        if not self.busy:
            return
        stats = self.server.stats
        stats.running -= 1
        stats.finished[reason] = stats.finished.get(reason, 0) + 1
        self.busy = False
        if not self.closed:
            self._next_request()


class MockServer:
    """The server object: configuration, counters, a precise scheduler and request routing."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.stats = _Stats()
        self.loop = asyncio.get_running_loop()
        self._server: asyncio.AbstractServer | None = None
        self.stamping: dict[int, _StampingSocket] = {}  # the listener's accepted sockets (precise mode)
        self.first_arrival: float | None = None  # loop time of the first generation request (the pause counts from it)

    def pause(self) -> tuple[float, float] | None:
        """The server-wide pause (`MockConfig.pause_at_s`) as (start, end) in loop time, once it can be placed."""
        cfg = self.config
        if cfg.pause_at_s is None or not cfg.pause_s or self.first_arrival is None:
            return None
        start = self.first_arrival + cfg.pause_at_s
        return start, start + cfg.pause_s

    def schedule(self, when: float, callback: Callable[[], None]) -> None:
        """Runs `callback` at loop time `when`; with `precise`, wakes ~1.5 ms early and spins to the exact time."""
        if not self.config.precise:
            self.loop.call_at(when, callback)
            return
        self.loop.call_at(when - 0.0015, self._spin, when, callback)

    def _spin(self, when: float, callback: Callable[[], None]) -> None:
        clock = self.loop.time
        while clock() < when:
            pass
        callback()

    def _fault_for(self, body: dict) -> Fault | None:
        if isinstance(body.get("mock_fault"), dict):
            return Fault.from_body(body["mock_fault"])
        for fault in self.config.faults:
            if self.stats.requests % fault.every == 0:
                return fault
        return None

    def handle(
        self, conn: _Connection, method: str, path: str, raw: bytes, auth: str = "", arrival: float | None = None
    ) -> None:
        cfg = self.config
        if cfg.api_key is not None and path.startswith("/v1/") and auth != f"Bearer {cfg.api_key}":
            return conn.send(_response(401, _error_body(401, "missing or wrong API key")))
        if method == "GET" and path == "/health":
            return conn.send(_response(200, b""))
        if method == "GET" and path == "/v1/models":
            data = {
                "object": "list",
                "data": [
                    {"id": cfg.model, "object": "model", "owned_by": "servetune", "max_model_len": cfg.max_model_len}
                ],
            }
            return conn.send(_response(200, json.dumps(data).encode()))
        if path == "/mock/ttft":  # what a client's TTFT is compared with (GET reads, DELETE clears)
            st = self.stats
            seen = json.dumps({"ttft_ms": st.ttft_ms, "origin": st.origin, "socket_wait_ms": st.socket_wait_ms})
            if method == "DELETE":
                st.ttft_ms, st.socket_wait_ms = [], []
            return conn.send(_response(200, seen.encode()))
        if method == "GET" and path == "/metrics":
            return conn.send(_response(200, self.stats.render(cfg.model), b"text/plain; version=0.0.4"))
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions", "/tokenize"):
            return conn.send(_response(404, _error_body(404, f"no route {method} {path}")))
        try:
            body = json.loads(raw)
        except ValueError:
            return conn.send(_response(400, _error_body(400, "body is not JSON")))
        if path == "/tokenize":
            n = _count_words(body)
            return conn.send(
                _response(
                    200, json.dumps({"count": n, "max_model_len": cfg.max_model_len, "tokens": list(range(n))}).encode()
                )
            )
        arrival = self.loop.time() if arrival is None else arrival
        if self.first_arrival is None:
            self.first_arrival = arrival
        self.stats.requests += 1
        fault = self._fault_for(body)
        if fault is not None and fault.kind == "status":
            return conn.send(_response(fault.status, _error_body(fault.status, f"mock status {fault.status}")))
        chat = path == "/v1/chat/completions"
        self.stats.running += 1
        self.stats.prompt_tokens += _count_words(body)
        self.stats.count_prefix(_prompt_words(body))
        stream = _Stream(conn, body, chat, fault, arrival)
        if body.get("stream"):
            return stream.start()
        done = stream.t0 + (stream.n - 1) * stream.itl
        pause = self.pause()
        if pause is not None and arrival < pause[1] and done > pause[0]:  # the pause falls inside its generation
            done += pause[1] - max(pause[0], arrival)
        self.schedule(done, lambda: self._answer(conn, stream))

    def _answer(self, conn: _Connection, stream: _Stream) -> None:
        """A non-streamed answer, sent when the last token would have been."""
        if conn.closed:
            return
        n, cfg = stream.n, self.config
        self.stats.generation_tokens += n
        usage = {
            "prompt_tokens": stream.prompt_tokens,
            "completion_tokens": n,
            "total_tokens": stream.prompt_tokens + n,
        }
        text = _TOKEN * n
        choice: dict = {"index": 0, "finish_reason": stream.finish}
        if stream.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        data = {
            "id": "cmpl-mock",
            "object": "chat.completion" if stream.chat else "text_completion",
            "model": cfg.model,
            "choices": [choice],
            "usage": usage,
        }
        conn.transport.write(_response(200, json.dumps(data).encode()))
        conn.finish_response(stream.finish)

    async def start(self, host: str = "127.0.0.1", port: int = 0, reuse_port: bool = False) -> int:
        """Starts listening; returns the bound port (port 0 picks a free one)."""
        listener = _StampingSocket(socket.AF_INET, socket.SOCK_STREAM) if self.config.precise else socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if isinstance(listener, _StampingSocket):  # accepted sockets inherit the option: their first data is stamped
            listener.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            self.stamping = listener.accepted
        listener.bind((host, port))
        listener.listen(4096)
        listener.setblocking(False)
        self._server = await self.loop.create_server(lambda: _Connection(self), sock=listener)
        return int(listener.getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def serve_forever(
    config: MockConfig, host: str, port: int, ready: Callable[[int], None] | None = None, reuse_port: bool = False
) -> None:
    """Runs the mock server until cancelled; `ready(port)` is called once it listens."""
    server = MockServer(config)
    bound = await server.start(host, port, reuse_port)
    if ready is not None:
        ready(bound)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


@asynccontextmanager
async def running(config: MockConfig, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """The mock server on the current loop, on a free port, for tests: yields its base URL."""
    server = MockServer(config)
    port = await server.start(host, 0)
    try:
        yield f"http://{host}:{port}"
    finally:
        await server.close()


def run_mock_server(args: MockServerArgs) -> None:
    """`servetune mock-server`: serves until Ctrl-C; says where once it listens."""
    config = MockConfig(
        model=args.model,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        output_tokens=args.output_tokens,
        reasoning_tokens=args.reasoning_tokens,
        precise=args.precise,
        api_key=args.api_key,
        faults=tuple(Fault.parse(f) for f in args.fault),
    )

    def ready(bound: int) -> None:
        print(
            f"mock server ready on http://{args.host}:{bound} (model {args.model}, ttft {args.ttft_ms} ms, "
            f"itl {args.itl_ms} ms)",
            file=sys.stderr,
            flush=True,
        )

    coro = serve_forever(config, args.host, args.port, ready, reuse_port=args.reuse_port)
    try:
        if args.uvloop:
            import uvloop

            run_coroutine(coro, uvloop.new_event_loop)
        else:
            run_coroutine(coro)
    except KeyboardInterrupt:
        pass
    except OSError as err:
        raise ServetuneError(
            f"cannot listen on {args.host}:{args.port}: {err}", "pick a free port with --port"
        ) from None
