"""The supervisor's HTTP face on 127.0.0.1: its Prometheus metrics, status, health, and switch requests.

`GET /metrics` (the supervisor's own series; the engine's are behind the proxy at `/metrics`), `GET /status`,
`GET /healthz` (the supervisor loop lives), `GET /readyz` (200 while the main role has a ready engine) and
`POST /switch` (bearer token from the run folder's control.token, mode 0600) with an engine config as JSON, the
switch's bound on unavailability and whether only its plan is asked (`check`); the answer (the memory plan, and
the outcome) comes when the procedure has finished, or at once for a check or a refusal. `request_switch` is the
client side (`servetune serve --switch NEW`): it finds the running supervisor from its run folder and waits for
the outcome.
The server sees the supervisor only through `ControlHost`, so neither module imports the other's internals.
"""

from __future__ import annotations

import hmac
import json
import math
import queue
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from servetune.control.client import ControlClient, ControlError, ControlTimeouts
from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.operate.source import config_from_data
from servetune.process.interrupts import run_coroutine

MAX_BODY_BYTES = 1 << 20
MAX_UNAVAILABLE_S = 86400.0
"""A day: the bound `--max-unavailable-s` has on the command line."""
STATE_FILE = "serve.json"
"""In the run folder while `servetune serve` runs: its pid, proxy and control URLs."""
LOCK_FILE = "serve.lock"
"""In the run folder: the lock the running serve holds (flock), and who it is; one serve per run folder."""
TOKEN_FILE = "control.token"
"""In the run folder (mode 0600) while `servetune serve` runs: the bearer token of POST /switch."""


@dataclass
class SwitchRequest:
    """A pending switch: the control server waits on `done` for `result`."""

    cfg: EngineConfig
    check: bool = False
    """Only the plan is asked: nothing is started or stopped."""
    max_unavailable_s: float = 0.0
    """The longest time without a ready engine this switch may cause (a drain-and-replace)."""
    result: dict[str, Any] | None = None
    done: threading.Event = field(default_factory=threading.Event)


class ControlHost(Protocol):
    """What the control face needs of the supervisor."""

    queue: queue.Queue[Any]

    def metrics_text(self) -> bytes: ...

    def status(self) -> dict[str, Any]: ...

    def ready(self) -> bool: ...


class ControlServer:
    """A threaded HTTP server for one supervisor."""

    def __init__(self, supervisor: ControlHost, port: int, token: str) -> None:
        self.supervisor = supervisor
        self.token = token
        handler = _handler(self)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="servetune control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def alive(self) -> bool:
        """True while the server's thread serves (an error inside `serve_forever` ends it)."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Releases the port of a server whose thread has ended (`stop` would wait for that thread)."""
        self.httpd.server_close()

    def switch(self, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            data = json.loads(body)
            cfg = config_from_data(data.get("config") if isinstance(data, dict) else None, "the switch request")
            check = data.get("check", False)
            bound = data.get("max_unavailable_s", 0.0)
            if not isinstance(check, bool):
                raise ValueError(f"check must be true or false, not {check!r}")
            if isinstance(bound, bool) or not isinstance(bound, int | float) or not 0 <= bound <= MAX_UNAVAILABLE_S:
                raise ValueError(f"max_unavailable_s must be a number of seconds in [0, {MAX_UNAVAILABLE_S:g}]")
        except (ValueError, ServetuneError) as err:
            problem = err.problem if isinstance(err, ServetuneError) else str(err)
            return 400, {"ok": False, "reason": problem}
        request = SwitchRequest(cfg=cfg, check=check, max_unavailable_s=float(bound))
        self.supervisor.queue.put(request)
        request.done.wait()
        result = request.result or {"ok": False, "reason": "the supervisor stopped before the switch ran"}
        return (200 if result.get("ok") else 409), result


def _handler(server: ControlServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the event log records what matters."""

        def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, data: Any) -> None:
            self._send(code, json.dumps(data, default=str).encode())

        def do_GET(self) -> None:
            sup = server.supervisor
            if self.path == "/metrics":
                self._send(200, sup.metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
            elif self.path == "/status":
                self._json(200, sup.status())
            elif self.path == "/healthz":
                self._json(200, {"ok": True})
            elif self.path == "/readyz":
                ready = sup.ready()
                self._json(200 if ready else 503, {"ready": ready})
            else:
                self._json(404, {"error": f"no {self.path}"})

        def do_POST(self) -> None:
            if self.path != "/switch":
                self._json(404, {"error": f"no {self.path}"})
                return
            given = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if not hmac.compare_digest(given.encode(), server.token.encode()):
                self._json(401, {"ok": False, "reason": "wrong or missing control token"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY_BYTES:
                self._json(400, {"ok": False, "reason": "the body must be a JSON engine config up to 1 MiB"})
                return
            code, result = server.switch(self.rfile.read(length))
            self._json(code, result)

    return Handler


def request_switch(
    run_dir: Path,
    cfg: EngineConfig,
    timeout_s: float | None = None,
    *,
    check: bool = False,
    max_unavailable_s: float = 0.0,
) -> dict[str, Any]:
    """Asks the `servetune serve` running in `run_dir` to switch to `cfg` (or, `check`, for the switch's plan
    only); the outcome — a refusal by the plan included (`refused`, with its fix) — or a ServetuneError when the
    switch was tried and failed. The wait is `timeout_s`, else the one the running serve wrote in its state (its
    startup timeout, its drain and some slack): the serve's options, not the client's, decide how long a switch
    may take."""
    try:
        state = json.loads((run_dir / STATE_FILE).read_text())
        token = (run_dir / TOKEN_FILE).read_text().strip()
        wait_s = timeout_s if timeout_s is not None else float(state["switch_timeout_s"])
        if not (math.isfinite(wait_s) and wait_s > 0):
            raise ValueError(f"its {STATE_FILE} has switch_timeout_s {wait_s}")
        url = state["control_url"]
        client = ControlClient(url, api_key=token, timeouts=ControlTimeouts(total_s=wait_s))
    except (OSError, ValueError, KeyError, TypeError, ServetuneError) as err:
        # no state, or one no running serve wrote (a stale or broken serve.json): nothing to ask
        why = f"its {STATE_FILE} has no {err}" if isinstance(err, KeyError) else str(err).splitlines()[0]
        raise ServetuneError(
            f"no running `servetune serve` in {run_dir} ({why})", "pass the --run-dir of the running serve"
        ) from None
    try:
        body = {"config": cfg.model_dump(mode="json"), "check": check, "max_unavailable_s": max_unavailable_s}
        status, answer = run_coroutine(client.post_json("/switch", body))
    except ControlError as err:
        raise ServetuneError(
            f"cannot reach the running serve at {url}: {err.problem}",
            "is `servetune serve` still running?",
        ) from None
    if isinstance(answer, dict) and answer.get("refused"):
        return dict(answer)
    if status != 200:
        reason = answer.get("reason") if isinstance(answer, dict) else None
        changed = isinstance(answer, dict) and answer.get("nothing_changed") is False
        what = "the old config was started again" if changed else "nothing changed"
        raise ServetuneError(
            f"the switch failed, {what}: {reason or f'HTTP {status}'}",
            "fix the new config (its log is named in the event log) and switch again",
        )
    return dict(answer) if isinstance(answer, dict) else {}
