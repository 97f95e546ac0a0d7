"""The supervisor's HTTP face on 127.0.0.1: its Prometheus metrics, status, health, and switch requests.

`GET /metrics` (the supervisor's own series; the engine's are behind the proxy at `/metrics`), `GET /status`,
`GET /healthz` (the supervisor loop lives), `GET /readyz` (200 while the main role has a ready engine) and
`POST /switch` (bearer token from the run folder's control.token, mode 0600) with an engine config as JSON;
the answer comes when the blue-green procedure has finished.
"""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from servetune.errors import ServetuneError
from servetune.operate.source import config_from_data

if TYPE_CHECKING:
    from servetune.operate.supervisor import Supervisor

MAX_BODY_BYTES = 1 << 20


class ControlServer:
    """A threaded HTTP server for one supervisor."""

    def __init__(self, supervisor: Supervisor, port: int, token: str) -> None:
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

    def switch(self, body: bytes) -> tuple[int, dict[str, Any]]:
        from servetune.operate.supervisor import SwitchRequest

        try:
            data = json.loads(body)
            cfg = config_from_data(data.get("config") if isinstance(data, dict) else None, "the switch request")
        except (ValueError, ServetuneError) as err:
            problem = err.problem if isinstance(err, ServetuneError) else f"not JSON: {err}"
            return 400, {"ok": False, "reason": problem}
        request = SwitchRequest(cfg=cfg, done=threading.Event())
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
                self._send(200, sup.metrics.render(), "text/plain; version=0.0.4; charset=utf-8")
            elif self.path == "/status":
                self._json(200, sup.status())
            elif self.path == "/healthz":
                self._json(200, {"ok": True})
            elif self.path == "/readyz":
                ready = sup.roles["main"].state == "ready"
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
