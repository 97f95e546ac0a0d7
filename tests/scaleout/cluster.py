"""A real Ray cluster on loopback for the tests and the benchmark: a head and worker nodes, each a `ray start --block`
of its own (the node's processes are its children; stopping it stops them), on its own 127.0.0.x address (Ray turns
127.0.0.1 into the machine's address, other loopback addresses it keeps), with a custom resource standing in for GPUs
and the smallest footprint Ray allows (one CPU, 100 MB of object store, no dashboard), and a token of its own (Ray's
token authentication: `env()` carries it to the drivers that join).

Everything belongs to this cluster only: a temp dir of its own, free ports, and processes stopped by their own ids —
never `ray stop` without an address, never a kill by name that would hit someone else's cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from servetune.process.ports import free_port

REPO = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
START_S = 90.0
REGISTER_TIMEOUT = "The current node timed out during startup"
"""What `ray start` says when its raylet has not registered with the GCS within 30 s: a bound fixed in Ray's code
(ray/_private/node.py, not a setting), which a 2-core machine under a CPU hog can pass while the node is only slow."""
REGISTER_RETRIES = 1
"""A node that Ray gave up on for that bound is started once more (its first attempt's processes killed first)."""


@dataclass
class Node:
    address: str
    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """The node dies as its machine would: every process of it (its `ray start`, the raylet, the Ray workers and
        what they started: slots, engines) frozen top-down, then killed. Frozen first, so that none of them acts on
        the others' deaths (a worker relaying its slot's end, a slot recording its engine's) before all are gone."""
        try:
            procs = [psutil.Process(self.proc.pid)]
            procs += procs[0].children(recursive=True)  # parents before their children
        except psutil.NoSuchProcess:
            procs = []
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for proc in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.send_signal(sig)
        self.proc.wait(timeout=30)


@dataclass
class RayCluster:
    """`with RayCluster(workers=1) as cluster:` → `cluster.address` (HOST:PORT), `cluster.nodes` (head first)."""

    workers: int = 1
    resource: str = "fake_gpu"
    per_node: int = 1
    cpus: int = 1
    head_extra: dict[str, float] = field(default_factory=dict)
    """More resources on the head only (the benchmark's `one_slot`: a run that fits one launch at a time)."""
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="st-ray-")))
    nodes: list[Node] = field(default_factory=list)
    address: str = ""

    def env(self) -> dict[str, str]:
        """The environment of every node (their Ray workers inherit it): this checkout's servetune, its tiny model."""
        path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p)
        token = self.root / "auth_token"  # a token of this cluster's own: nothing else can join it or run code on it
        if not token.exists():
            token.write_text(secrets.token_hex(32))
            token.chmod(0o600)
        return {
            **os.environ,
            "PYTHONPATH": path,
            "PYTHONUNBUFFERED": "1",
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
        }

    def _start(self, index: int, head: bool) -> Node:
        address = f"127.0.0.{index + 2}"
        resources = {self.resource: self.per_node, **(self.head_extra if head else {})}
        argv = [
            str(RAY), "start", "--block", "--node-ip-address", address, "--num-cpus", str(self.cpus),
            "--resources", json.dumps(resources), "--object-store-memory", "100000000",
            "--temp-dir", str(self.root / f"n{index}"), "--dashboard-agent-listen-port", str(free_port()),
        ]  # fmt: skip
        if head:
            self.address = f"{address}:{free_port()}"
            argv += ["--head", "--port", self.address.split(":")[1], "--include-dashboard", "false"]
            argv += ["--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port())]
        else:
            argv += ["--address", self.address]
        log, temp = self.root / f"node{index}.log", str(self.root / f"n{index}")
        attempts = 0
        while True:
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    argv, stdout=out, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True
                )
            node = Node(address, proc, log)
            self.nodes.append(node)
            deadline = time.monotonic() + START_S
            while b"Ray runtime started" not in log.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            else:
                return node
            text, attempts = log.read_text(errors="replace"), attempts + 1
            if REGISTER_TIMEOUT not in text or attempts > REGISTER_RETRIES:
                raise RuntimeError(f"ray node {address} did not start:\n{text[-3000:]}")
            # What the timed-out start left (its `ray start` has exited: its raylet and agents are found by the
            # node's own temp dir on their command lines), killed before the same node starts once more.
            node.kill()
            for left in self.processes():
                with contextlib.suppress(psutil.Error):
                    if any(temp in part for part in left.cmdline()):
                        left.kill()
            self.nodes.remove(node)

    def __enter__(self) -> RayCluster:
        try:
            self._start(0, head=True)
            for i in range(self.workers):
                self._start(i + 1, head=False)
            self.wait_nodes(1 + self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_nodes(self, count: int) -> None:
        """Until the cluster counts `count` alive nodes (asked through the `ray` CLI of this cluster's address)."""
        code = (
            "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            out = subprocess.run(
                [sys.executable, "-c", code, self.address], capture_output=True, text=True, env=self.env(), timeout=60
            )
            if out.stdout.strip().isdigit() and int(out.stdout.strip()) >= count:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the cluster at {self.address} did not reach {count} nodes")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops the worker nodes, then the head, by their own `ray start` processes; then kills, by pid, whatever
        of theirs is left (a process the nodes started, or one whose command line names this cluster's temp dir)."""
        started = self.processes()
        for node in reversed(self.nodes):
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in reversed(self.nodes):
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(node.proc.pid, signal.SIGKILL)
                node.proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while self.left(started) and time.monotonic() < deadline:
            time.sleep(0.2)
        for proc in self.left(started):
            proc.kill()
        shutil.rmtree(self.root, ignore_errors=True)  # the nodes' logs and sockets (a few MB per node)

    def processes(self) -> list[psutil.Process]:
        """This cluster's living processes: the nodes' descendants, and any whose command line names its temp dir."""
        found: dict[int, psutil.Process] = {}
        for node in self.nodes:
            try:
                for proc in psutil.Process(node.proc.pid).children(recursive=True):
                    found[proc.pid] = proc
            except psutil.Error:
                continue
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if any(str(self.root) in part for part in proc.info["cmdline"] or ()):
                    found[proc.pid] = proc
            except psutil.Error:
                continue
        return list(found.values())

    def left(self, procs: list[psutil.Process]) -> list[psutil.Process]:
        """Those of `procs` still running (the same processes: psutil checks their start times)."""
        out = []
        for proc in [*procs, *self.processes()]:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    out.append(proc)
            except psutil.Error:
                continue
        return out
