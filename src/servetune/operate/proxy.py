"""nginx in front of the engines: its config (SSE-safe, sized from measurements) and its process.

One config owner: `render()` writes the config for `servetune serve` (upstreams on 127.0.0.1 ports that change
with every restart or switch) and for deployment files (fixed service names).  The process is started as its
own process group with its own prefix under the run folder, listening on a free 127.0.0.1 port, never the
system nginx service.  `apply()` validates a new config with `nginx -t` and reloads: new requests go to the new
upstreams, old workers finish their in-flight streams (bounded by `worker_shutdown_timeout`) and exit.  An old
worker with no request left in flight is stopped (`retire_idle`): nginx closes its kept-alive idle connections on
a reload but not the ones on which no request has come yet (a load client opens those ahead), and it would serve
the first request on each with the old config until the drain deadline, then cut the one in flight then.  While a
pool has no ready engine its upstream is a `down` placeholder, so nginx answers a fast 503 with Retry-After.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError
from servetune.operate.evidence import Sized
from servetune.process.group import ProcessGroup, TeardownReport
from servetune.process.proctable import group_members, living

POOLS = ("main", "long")
"""Upstream pools: `main` serves everything, `long` (when configured) the prompts above the size threshold."""
RETRY_AFTER_S = 5
NGINX_TEST_TIMEOUT_S = 20.0
UNAVAILABLE_BODY = (
    '{"error": {"message": "no engine is ready (servetune: starting, restarting or switching)", '
    '"type": "unavailable", "code": 503}}'
)


class ProxySettings(BaseModel):
    """What the nginx config is made of; every sized number keeps its source for the config's comments."""

    model_config = ConfigDict(frozen=True)

    listen: str = "127.0.0.1:8000"
    read_timeout: Sized
    body_bytes: Sized
    long_prompt_bytes: Sized | None = None
    drain_s: Sized = Sized(value=30, source="servetune's default drain deadline")
    connect_timeout_s: float = 5.0
    upstream_keepalive: int = 64
    upstream_keepalive_timeout_s: float = 4.0
    worker_processes: int = 1
    worker_connections: int = 4096


def upstream_keepalive(engines: Iterable[str]) -> int:
    """Idle connections nginx keeps to the engines: none when a llama.cpp server is among them. Its HTTP server
    (cpp-httplib) gives each open connection a worker thread and closes idle ones after 5 s, so connections
    nginx keeps idle hold its threads, and a request sent on one as it is closed fails ("upstream prematurely
    closed connection" after a 5 s wait: benchmarks/operate met it); a loopback connect per request costs less.
    Other engines keep 64, reused for at most `upstream_keepalive_timeout_s` (4 s: under uvicorn's 5 s idle
    limit, vLLM's `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`, so nginx never sends on a connection the engine is closing)."""
    return 0 if "llamacpp" in set(engines) else 64


def above_regex(n: int) -> str:
    """A regex that matches a decimal integer strictly greater than `n` (nginx `map` has no numeric compare)."""
    if n < 0:
        raise ServetuneError(f"a size threshold must not be negative, got {n}", "give a positive number of bytes")
    s = str(n)
    alternatives = [f"[1-9][0-9]{{{len(s)},}}"]  # more digits
    for i, ch in enumerate(s):
        d = int(ch)
        if d == 9:
            continue
        rest = len(s) - i - 1
        alternatives.append(s[:i] + f"[{d + 1}-9]" + (f"[0-9]{{{rest}}}" if rest else ""))
    return "^0*(?:" + "|".join(alternatives) + ")$"


def render(
    settings: ProxySettings,
    upstreams: dict[str, str | None],
    *,
    prefix: Path | None = None,
    sources: dict[str, str] | None = None,
) -> str:
    """The nginx config.  `upstreams` maps a pool to `host:port` (None: no ready engine → fast 503).
    `prefix` set: a self-contained config for `servetune serve` (pid, logs and temp files under it, daemon off);
    None: a config for a container (`/etc/nginx/nginx.conf` of the official image)."""
    s = settings
    src = sources or {}
    lines = ["# Written by servetune (servetune.operate.proxy). Every sized number says where it came from."]
    for key, text in src.items():
        lines.append(f"# {key}: {text}")
    if prefix is not None:
        lines += [
            f"pid {prefix}/nginx.pid;",
            f"error_log {prefix}/error.log warn;",
        ]
        if os.geteuid() == 0:  # workers would switch to `nobody`, who cannot read a private run folder
            lines.append(f"user {pwd.getpwuid(0).pw_name};")
    else:
        lines += ["error_log /dev/stderr warn;"]
    lines += [
        f"worker_processes {s.worker_processes};",
        f"# drain deadline: {s.drain_s.source}",
        f"worker_shutdown_timeout {s.drain_s.int}s;",
        "events {",
        f"    worker_connections {s.worker_connections};",
        "}",
        "http {",
    ]
    if prefix is not None:
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            lines.append(f"    {kind}_temp_path {prefix}/tmp/{kind};")
        log = f"{prefix}/access.log"
    else:
        log = "/dev/stdout"
    lines += [
        "    log_format servetune '$msec $status $request_time $upstream_addr $upstream_status '",
        "                         '$upstream_response_time $content_length $servetune_pool \"$request\"';",
        f"    access_log {log} servetune;",
        "    keepalive_timeout 75s;",
        "    keepalive_requests 100000;",
        "    gzip off;",
        f"    # body size: {s.body_bytes.source}",
        f"    client_max_body_size {s.body_bytes.int};",
        f"    client_body_buffer_size {min(s.body_bytes.int, 16 << 20)};",
        "    map $http_content_length $servetune_pool {",
        "        default main;",
    ]
    if s.long_prompt_bytes is not None and "long" in upstreams:
        long = s.long_prompt_bytes
        lines += [
            f"        # long prompts: Content-Length above {long.int} bytes ({long.source})",
            f'        "~{above_regex(s.long_prompt_bytes.int)}" long;',
        ]
    lines.append("    }")
    for pool in POOLS:
        if pool not in upstreams:
            continue
        addr = upstreams[pool]
        lines.append(f"    upstream servetune_{pool} {{")
        if addr:
            lines.append(f"        server {addr} max_fails=0;")
            if s.upstream_keepalive:
                lines += [
                    f"        keepalive {s.upstream_keepalive};",
                    f"        keepalive_timeout {s.upstream_keepalive_timeout_s:g}s;  # under the engine's idle limit",
                ]
        else:
            lines.append("        server 127.0.0.1:9 down;  # no ready engine: nginx answers 503 at once")
        lines.append("    }")
    if "long" not in upstreams:
        lines += ["    upstream servetune_long {", "        server 127.0.0.1:9 down;", "    }"]
    lines += [
        "    server {",
        f"        listen {s.listen};",
        "        location = /servetune/proxy-health { default_type text/plain; return 200 'ok'; }",
        "        location / {",
        "            proxy_pass http://servetune_$servetune_pool;",
        "            proxy_http_version 1.1;  # keep-alive to the engine",
        '            proxy_set_header Connection "";',
        "            proxy_set_header Host $host;",
        "            proxy_buffering off;  # SSE: every token chunk goes out as it arrives",
        "            proxy_cache off;",
        f"            proxy_connect_timeout {s.connect_timeout_s:g}s;",
        f"            # read timeout: {s.read_timeout.source}",
        f"            proxy_read_timeout {s.read_timeout.int}s;",
        f"            proxy_send_timeout {s.read_timeout.int}s;",
        f"            send_timeout {s.read_timeout.int}s;",
        "            proxy_next_upstream off;  # a generation is not idempotent: never sent twice",
        "            error_page 502 504 = @servetune_unavailable;",
        "        }",
        "        location @servetune_unavailable {",
        "            default_type application/json;",
        f"            add_header Retry-After {RETRY_AFTER_S} always;",
        f"            return 503 '{UNAVAILABLE_BODY}';",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


class NginxGone(ServetuneError):
    """nginx's master is not running (killed, or died on its own): the supervisor restarts it, nothing else."""


def _socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` has open (none once it is gone)."""
    held = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    held.add(link[8:-1])
    return held


def _holding(pids: set[int], inode: str) -> bool:
    """True while one of `pids` has the socket `inode` open."""
    return any(inode in _socket_inodes(pid) for pid in pids)


def _busy(pid: int, engines: set[str]) -> bool:
    """True while nginx worker `pid` may be serving a request: it has a TCP connection open to one of `engines`
    (`host:port`, IPv4: nginx connects to the engine for each request it proxies, and closes idle kept-alive ones
    when it shuts down), or bytes wait in one of its sockets' queues (an answer the engine already finished and
    closed, still being written to the client; a request read in part)."""
    want = set()
    for addr in engines:
        host, _, port = addr.rpartition(":")
        try:
            packed = socket.inet_aton(host)
        except OSError:
            return True  # not an IPv4 address: in flight or not, it cannot be told; the drain deadline decides
        want.add(f"{int.from_bytes(packed, 'little'):08X}:{int(port):04X}")
    try:
        rows = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False  # gone
    held = _socket_inodes(pid)
    for cols in (row.split() for row in rows):
        if len(cols) > 9 and cols[9] in held and cols[3] != "0A":  # 0A: a listening socket (its queue: accepts)
            tx, _, rx = cols[4].partition(":")
            if cols[2] in want or int(tx, 16) or int(rx, 16):
                return True
    return False


IDLE_GRACE_S = 0.2
"""How long an old worker must be seen idle (`_busy` false) before it is stopped: a response's last bytes can sit
in nginx's own buffers, not yet in a socket's queue, for a moment after the engine closed its connection."""


NGINX_ENV = "SERVETUNE_NGINX"
"""The nginx executable to run, when it is not the one on PATH (an nginx unpacked from Debian's package into a
prefix of its own: benchmarks/operate/nginx_unpack.sh)."""


def nginx_binary() -> str:
    """The nginx executable: $SERVETUNE_NGINX, else nginx on PATH, else /usr/sbin/nginx (Debian puts it there, and
    a non-root PATH may lack it)."""
    given = os.environ.get(NGINX_ENV)
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise ServetuneError(
                f"{NGINX_ENV}={given} is not an executable file",
                f"point {NGINX_ENV} at an nginx executable, or unset it",
            )
        return given
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if not found:
        raise ServetuneError(
            "nginx is not installed",
            f"apt-get install -y nginx (scripts/setup.sh installs it), or set {NGINX_ENV} to an nginx executable",
        )
    return found


def check_config(conf: Path, prefix: Path) -> None:
    """`nginx -t` on a config; a ServetuneError with nginx's own words when it is refused."""
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "tmp" / kind).mkdir(parents=True, exist_ok=True)
    argv = [nginx_binary(), "-t", "-q", "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=NGINX_TEST_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise ServetuneError(
            f"nginx refuses the generated config {conf}:\n{(proc.stderr or proc.stdout).strip()}",
            "this is a servetune bug when the inputs were valid: report it with the config",
        )


class Nginx:
    """A private nginx: `start`, `apply` (validated reload), `drain` (graceful quit), `stop`."""

    def __init__(self, prefix: Path, settings: ProxySettings) -> None:
        self.prefix = prefix
        self.settings = settings
        self.conf = prefix / "nginx.conf"
        self.group: ProcessGroup | None = None
        self.upstreams: dict[str, str | None] = {}
        self.sources: dict[str, str] = {}
        self.retiring: dict[int, set[str]] = {}
        """Old workers of earlier reloads, each with the upstream addresses of its config, until they exit."""
        self._idle_since: dict[int, float] = {}
        """When each retiring worker was first seen idle, since it last was busy."""

    @property
    def url(self) -> str:
        return f"http://{self.settings.listen}"

    def _write(self, upstreams: dict[str, str | None]) -> None:
        self.prefix.mkdir(parents=True, exist_ok=True)
        tmp = self.prefix / "nginx.conf.new"
        tmp.write_text(render(self.settings, upstreams, prefix=self.prefix, sources=self.sources))
        check_config(tmp, self.prefix)
        tmp.replace(self.conf)

    def start(self, upstreams: dict[str, str | None], timeout_s: float = 10.0) -> None:
        """Starts nginx with a config for `upstreams`; returns once its own master holds the listening socket."""
        self._write(upstreams)
        self.upstreams = dict(upstreams)
        argv = [
            nginx_binary(),
            *("-p", str(self.prefix), "-e", str(self.prefix / "error.log"), "-c", str(self.conf)),
            *("-g", "daemon off;"),
        ]
        self.group = ProcessGroup.start(argv, log_path=self.prefix / "nginx.out")
        deadline = time.monotonic() + timeout_s
        while not self.listening():
            if not self.group.alive() or time.monotonic() > deadline:
                err = (self.prefix / "error.log").read_text(errors="replace")[-1500:]
                self.group.stop(grace_s=2)
                raise ServetuneError(f"nginx did not start on {self.settings.listen}:\n{err}", "see the error above")
            time.sleep(0.02)

    def alive(self) -> bool:
        """True while nginx's master process runs."""
        return self.group is not None and self.group.alive()

    def listening(self) -> bool:
        """True while a process of nginx's own group holds the listening socket. A connection that succeeds is not
        proof: another program may have taken the port while nginx was down (nginx then retries its bind for
        2.5 s and exits)."""
        if self.group is None:
            return False
        inodes = self._listener_inodes()
        if inodes is None:  # no /proc/net/tcp to read: a connection is the best proof there is
            host, _, port = self.settings.listen.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=0.5):
                    return True
            except OSError:
                return False
        return any(set(inodes) & _socket_inodes(pid) for pid in self.group.members())

    def workers(self) -> set[int]:
        """Pids of the worker processes (the group's members other than the master)."""
        if self.group is None:
            return set()
        return {m.pid for m in living(group_members(self.group.pgid))} - {self.group.pid}

    def apply(self, upstreams: dict[str, str | None], timeout_s: float = 10.0) -> set[int]:
        """Validates and loads a new config; returns the old workers (they exit once their requests are done)."""
        if self.group is None or not self.group.alive():
            raise NginxGone("nginx is not running", "the supervisor restarts it")
        old = self.workers()
        self._write(upstreams)
        try:
            os.kill(self.group.pid, signal.SIGHUP)  # the master re-reads the config; our own child, by pid
        except ProcessLookupError:
            raise NginxGone("nginx died before its reload", "the supervisor restarts it") from None
        deadline = time.monotonic() + timeout_s
        listener = self._listener_inode()
        # In force once a new worker runs and no old worker holds the listening socket any more (an old worker
        # that has not yet handled its QUIT would still accept connections and serve them with the old config).
        while not (self.workers() - old) or (listener and _holding(old, listener)):
            if not self.group.alive():
                raise NginxGone("nginx died during its reload", "the supervisor restarts it")
            if time.monotonic() > deadline:
                raise ServetuneError("nginx did not take the new config", f"read {self.prefix / 'error.log'}")
            time.sleep(0.002)
        engines = {addr for addr in self.upstreams.values() if addr}
        self.retiring.update({pid: engines for pid in old})
        self.upstreams = dict(upstreams)
        self.retire_idle()
        return old

    def retire_idle(self) -> None:
        """Stops (SIGTERM) each old worker seen idle — no connection to an engine, no bytes queued in its sockets
        — for `IDLE_GRACE_S`. What it still holds then are client connections on which nothing was sent yet:
        nginx's graceful shutdown closes only kept-alive idle ones, so it would answer the first request on each
        with the old config (and the old engine) until the drain deadline, then cut the one in flight. Closed now,
        a client sends its next request on a fresh connection, to the new workers; one sent in the same instant
        gets nothing back, the keep-alive race HTTP clients meet on any idle connection and retry on a fresh one."""
        now = time.monotonic()
        for pid in set(self.retiring) - self.workers():
            del self.retiring[pid]
            self._idle_since.pop(pid, None)
        for pid, engines in list(self.retiring.items()):
            if _busy(pid, engines):
                self._idle_since.pop(pid, None)
                continue
            if now - self._idle_since.setdefault(pid, now) < IDLE_GRACE_S:
                continue
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.kill(pid, signal.SIGTERM)  # an old worker of our own nginx (a member of its group), by pid
            del self.retiring[pid]
            self._idle_since.pop(pid, None)

    def _listener_inode(self) -> str | None:
        """The inode of nginx's listening socket (from /proc/net/tcp), to see which workers still accept."""
        found = self._listener_inodes()
        return found[0] if found else None

    def _listener_inodes(self) -> list[str] | None:
        """The inodes of the sockets listening on nginx's port (None: /proc/net/tcp cannot be read)."""
        want = f"{int(self.settings.listen.rpartition(':')[2]):04X}"
        try:
            rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
        except OSError:
            return None
        return [cols[9] for cols in (row.split() for row in rows) if cols[1].endswith(":" + want) and cols[3] == "0A"]

    def drain_workers(self, pids: set[int], since: float) -> bool:
        """Waits for the old workers `pids`, told to quit by a reload asked for at `since` (monotonic), to exit; True
        when all finished their in-flight requests before the drain deadline, False when one was still there at
        it: nginx's `worker_shutdown_timeout` (the deadline, counted from the worker's own signal, which comes
        after `since`) then closes what it still streams, so those streams were cut, not drained. Waits a second
        past the deadline for that forced exit, so no old worker is left either way."""
        deadline = since + self.settings.drain_s.int
        while pids & self.workers():
            if time.monotonic() > deadline + 1.0:
                return False
            self.retire_idle()
            time.sleep(0.01)
        return time.monotonic() < deadline

    def drain(self, timeout_s: float) -> TeardownReport | None:
        """Graceful quit: stop accepting, let in-flight requests finish (up to the deadline), exit; then prove it."""
        if self.group is None:
            return None
        if self.group.alive():
            os.kill(self.group.pid, signal.SIGQUIT)
            deadline = time.monotonic() + timeout_s
            while self.group.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
        return self.group.stop(grace_s=2.0)

    def stop(self) -> TeardownReport | None:
        return self.group.stop(grace_s=2.0) if self.group else None
