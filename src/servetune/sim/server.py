"""`servetune sim-serve`: an OpenAI-compatible HTTP server whose engine is the simulator.

The engine loop runs in real time (or `--time-scale` times faster): it plans a step, sleeps the step's
simulated duration, then streams the tokens the step produced. Requests that arrive during a step wait
for the next one, as in vLLM. Endpoints: `/health`, `/v1/models`, `/metrics`, `/tokenize`, `/version`,
`/reset_prefix_cache`, `/v1/completions` and `/v1/chat/completions` (streaming or not, with `usage`,
`stream_options.include_usage` and `continuous_usage_stats`). `run_sim_serve` is the command (`sim/args.py`
`SimServeCommand`): vLLM's startup lines, then the server until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from servetune.errors import ServetuneError
from servetune.process.interrupts import run_coroutine
from servetune.sim.args import SimServeCommand
from servetune.sim.deployment import SimDeployment, build_deployment
from servetune.sim.engine import SimEngine
from servetune.sim.flags import parse_sim_args
from servetune.sim.kvcache import block_hashes
from servetune.sim.metrics import ServerStats, render
from servetune.sim.scheduler import SimRequest
from servetune.sim.text import SimTokenizer


@dataclass
class _Live:
    """A request in flight: its token queue and timestamps (wall seconds, loop clock)."""

    queue: asyncio.Queue
    arrived: float
    prompt_tokens: int
    first: float | None = None
    last: float | None = None
    chunks: int = 0
    queued: float | None = None
    """When the engine's loop took it in: the first step planned after it was submitted (vLLM's QUEUED stamp)."""
    scheduled: float | None = None
    cached_tokens: int = 0


class SimServer:
    """Owns the engine, its real-time loop and the HTTP routes."""

    def __init__(self, deployment: SimDeployment) -> None:
        self.dep = deployment
        self.engine = SimEngine(deployment.limits, deployment.timing)
        self.tokenizer = SimTokenizer(deployment.args.model)
        self.stats = ServerStats()
        self.live: dict[str, _Live] = {}
        self._reqs: dict[str, SimRequest] = {}
        self._wake = asyncio.Event()
        self._api = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.dep.served_name

    # ------------------------------------------------------------------ engine loop
    async def run_engine(self) -> None:
        """Steps while there is work, keeping simulated time in step with the wall clock.

        Time is anchored when work starts after an idle spell, and each step ends at anchor + simulated
        time / scale, so the server's own HTTP and Python costs delay tokens but do not accumulate.
        """
        loop = asyncio.get_running_loop()
        scale = self.dep.args.time_scale
        anchor, simulated = loop.time(), 0.0
        while True:
            if not self.engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                anchor, simulated = loop.time(), 0.0
            start = loop.time()
            try:
                outcome = self.engine.step()
            except ServetuneError:
                # The head request can never get its blocks: end it (vLLM would have refused it) and go on.
                head = self.engine.scheduler.waiting[0]
                self.engine.abort(head.request_id)
                live = self.live.get(head.request_id)
                if live:
                    live.queue.put_nowait((0, "abort"))
                continue
            for rid in outcome.taken_in:
                live = self.live.get(rid)
                if live is not None:
                    live.queued = start
            for s in outcome.plan.scheduled:
                live = self.live.get(s.request.request_id)
                if live and live.scheduled is None:
                    live.scheduled = start
            simulated += outcome.duration
            await asyncio.sleep(max(0.0, anchor + simulated / scale - loop.time()))
            now = loop.time()
            delivered = sum(n for _, n, _ in outcome.events)
            for req, num_tokens, reason in outcome.events:
                rid = req.request_id
                live = self.live.get(rid)
                if live is None:
                    continue
                if live.first is None:
                    live.first = now
                    delivered += req.num_prompt_tokens - req.num_cached_prompt_tokens
                    self.stats.first_token((now - live.arrived) * scale)
                else:
                    self.stats.token_gaps([(now - (live.last or now)) * scale])
                live.last = now
                live.chunks += num_tokens
                live.cached_tokens = req.num_cached_prompt_tokens
                live.queue.put_nowait((num_tokens, reason))
                if reason:
                    self._finished(rid, reason, now)
            if outcome.events:
                self.stats.iteration(delivered)

    def _finished(self, rid: str, reason: str, now: float) -> None:
        live = self.live[rid]
        scale = self.dep.args.time_scale
        self._reqs.pop(rid, None)
        self.stats.finished(
            reason,
            e2e_s=(now - live.arrived) * scale,
            decode_s=None if live.first is None else (now - live.first) * scale,
            tokens=live.chunks,
            queue_s=None if live.scheduled is None else (live.scheduled - (live.queued or live.arrived)) * scale,
            prompt_tokens=live.prompt_tokens,
            prefill_s=None if live.scheduled is None or live.first is None else (live.first - live.scheduled) * scale,
        )

    # ------------------------------------------------------------------ HTTP
    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_get("/health", self.health)
        app.router.add_get("/ping", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _: web.Request) -> web.Response:
        return web.json_response({"version": self.dep.vllm_version})

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response(self.dep.models_payload(self.name))

    async def metrics(self, _: web.Request) -> web.Response:
        text = render(self.stats, self.engine.scheduler, self.name)
        return web.Response(text=text, content_type="text/plain")

    async def reset_prefix_cache(self, _: web.Request) -> web.Response:
        self.engine.scheduler.pool.reset_prefix_cache()
        return web.Response(status=200)

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        ids = self.tokenizer.encode_chat(body["messages"]) if "messages" in body else self._prompt_ids(body)
        return web.json_response({"tokens": ids, "count": len(ids), "max_model_len": self.dep.limits.max_model_len})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        return await self._serve(request, body, self._prompt_ids(body), chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        if not isinstance(body.get("messages"), list):
            raise _bad("'messages' must be a list of {role, content}")
        return await self._serve(request, body, self.tokenizer.encode_chat(body["messages"]), chat=True)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    async def _json(request: web.Request) -> dict:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _bad("request body is not JSON") from None
        if not isinstance(body, dict):
            raise _bad("request body must be a JSON object")
        return body

    def _prompt_ids(self, body: dict) -> list[int]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        raise _bad("'prompt' must be a string or a list of token ids (one prompt per request)")

    async def _serve(self, request: web.Request, body: dict, ids: list[int], chat: bool) -> web.StreamResponse:
        if body.get("model") not in (None, self.name, self.dep.args.model):
            raise _error(404, "NotFoundError", f"The model `{body.get('model')}` does not exist.", param="model")
        asked = (body.get("max_completion_tokens") if chat else None) or body.get("max_tokens")
        if asked is not None and (not isinstance(asked, int) or isinstance(asked, bool) or asked < 1):
            raise _bad("max_tokens must be a positive integer")
        max_tokens, problem = self.dep.check_request(len(ids), asked)
        if problem is not None:
            raise _bad(problem)
        if body.get("n", 1) != 1:
            raise _bad("sim-serve supports n=1 only")
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        loop = asyncio.get_running_loop()
        live = _Live(asyncio.Queue(), loop.time(), len(ids))
        self.live[rid] = live
        overhead = self.dep.timing.api_time(len(ids)) / self.dep.args.time_scale
        try:
            if overhead:
                async with self._api:  # the API server parses and tokenizes one request at a time
                    await asyncio.sleep(overhead)
            req = SimRequest(rid, len(ids), max_tokens, block_hashes(ids, self.dep.limits.block_size))
            self._reqs[rid] = req
            self.engine.submit(req)
            self._wake.set()
            if body.get("stream"):
                return await self._stream(request, body, rid, live, chat)
            return await self._whole(body, rid, live, chat)
        finally:
            if self._reqs.pop(rid, None) is not None:
                self.engine.abort(rid)
            self.live.pop(rid, None)

    def _usage(self, live: _Live, produced: int) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": live.prompt_tokens,
            "total_tokens": live.prompt_tokens + produced,
            "completion_tokens": produced,
        }
        if live.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": live.cached_tokens}
        return usage

    async def _whole(self, body: dict, rid: str, live: _Live, chat: bool) -> web.Response:
        produced, reason = 0, None
        while reason is None:
            n, reason = await live.queue.get()
            produced += n
        text = "".join(self.tokenizer.piece(i) for i in range(produced))
        created = int(time.time())
        if chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": []},
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason, "stop_reason": None}
            obj = "text_completion"
        return web.json_response(
            {
                "id": rid,
                "object": obj,
                "created": created,
                "model": self.name,
                "choices": [choice],
                "usage": self._usage(live, produced),
            }
        )

    async def _stream(self, request: web.Request, body: dict, rid: str, live: _Live, chat: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = include_usage and bool(opts.get("continuous_usage_stats"))
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"

        async def send(choices: list, usage: dict | None = None) -> None:
            msg = {"id": rid, "object": obj, "created": created, "model": self.name, "choices": choices}
            if usage is not None or include_usage:
                msg["usage"] = usage
            await resp.write(b"data: " + json.dumps(msg, separators=(",", ":")).encode() + b"\n\n")

        if chat:
            await send(
                [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}],
                self._usage(live, 0) if continuous else None,
            )
        produced, reason = 0, None
        while reason is None:
            n, reason = await live.queue.get()
            text = "".join(self.tokenizer.piece(produced + i) for i in range(n))
            produced += n
            if chat:
                choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": reason}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason, "stop_reason": None}
            await send([choice], self._usage(live, produced) if continuous else None)
        if include_usage:
            await send([], self._usage(live, produced))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _bad(message: str) -> web.HTTPException:
    """vLLM's error body for a 400."""
    return _error(400, "BadRequestError", message)


def _error(status: int, kind: str, message: str, param: str | None = None) -> web.HTTPException:
    """vLLM's error body (`{"object": "error", ...}`) with its status."""
    payload = {"object": "error", "message": message, "type": kind, "param": param, "code": status}
    cls = web.HTTPNotFound if status == 404 else web.HTTPBadRequest
    return cls(text=json.dumps(payload), content_type="application/json")


async def serve(deployment: SimDeployment, log: Callable[..., None]) -> None:
    """Binds the port, prints vLLM's ready lines, and serves until cancelled."""
    server = SimServer(deployment)
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, deployment.args.host, deployment.args.port)
    await site.start()
    engine_task = asyncio.create_task(server.run_engine())
    log(f"Starting vLLM API server 0 on http://{deployment.args.host}:{deployment.args.port}")
    log("Application startup complete.", uvicorn=True)
    try:
        await asyncio.Event().wait()
    finally:
        engine_task.cancel()
        await runner.cleanup()


def _vllm_log(message: str, uvicorn: bool = False) -> None:
    """Prints a line the way vLLM's logger (or uvicorn's) does, so log parsers read it unchanged."""
    if uvicorn:
        print(f"INFO:     {message}", flush=True)
    else:
        print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [sim_serve.py:1] {message}", flush=True)


def run_sim_serve(args: SimServeCommand) -> None:
    """`servetune sim-serve`: vLLM's startup lines, then the simulated server until Ctrl-C."""
    sim = parse_sim_args(list(args.engine_flags), allow_unknown=args.pass_unknown_flags)
    dep = build_deployment(sim)
    _vllm_log(
        f"servetune sim-serve (pid {os.getpid()}): simulating vLLM on {sim.tensor_parallel_size}x{sim.gpu}"
        f", time scale {sim.time_scale}"
    )
    for line in dep.startup_lines():
        _vllm_log(line)
    with contextlib.suppress(KeyboardInterrupt):
        run_coroutine(serve(dep, _vllm_log))
