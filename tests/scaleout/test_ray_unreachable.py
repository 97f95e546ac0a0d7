"""Joining a Ray cluster is bounded: `bench --ray` and `tune --executor ray` at an address where nothing answers
fail at once, naming the address (Ray turned `127.0.0.1:9` into this machine's address and retried for minutes,
deaf to SIGTERM); a listener that never answers as Ray does is given up after a bound, and SIGTERM stops the wait.
No cluster is started: each test has its own closed port or silent listener."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.operate.conftest import REPO

from servetune.process.ports import free_port

pytestmark = pytest.mark.engine
SILENT_HOST = "127.0.0.3"
"""A loopback address Ray keeps as given (it turns only 127.0.0.1 into this machine's)."""


@pytest.fixture(autouse=True)
def _needs_ray() -> None:
    pytest.importorskip("ray")


@pytest.fixture
def silent() -> Iterator[str]:
    """HOST:PORT of a socket that accepts connections (the kernel completes them) and never says a word."""
    sock = socket.socket()
    sock.bind((SILENT_HOST, 0))
    sock.listen(64)
    try:
        yield f"{SILENT_HOST}:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _servetune(*args: str) -> list[str]:
    return [sys.executable, "-m", "servetune", *args]


def _bench(address: str, tmp_path: Path) -> list[str]:
    return _servetune(
        "bench", "--url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", "words", "--requests", "3",
        "--ray", address, "--json", str(tmp_path / "run.json"),
    )  # fmt: skip


def _timed(argv: list[str], timeout_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    return done, time.monotonic() - t0


def test_bench_at_a_loopback_address_where_nothing_listens_fails_at_once(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    done, took = _timed(_bench(address, tmp_path), 120)
    assert done.returncode == 1, done.stderr
    assert f"no Ray cluster answers at {address} (Ray dials " in done.stderr and "Connection refused" in done.stderr
    assert "fix:" in done.stderr and "Traceback" not in done.stderr
    assert took < 60, took  # the imports of a cold start; the refusal itself takes a connect's time
    print(f"\nbench --ray {address}: refused in {took:.2f} s (command wall time)")


def test_tune_at_an_address_where_nothing_listens_fails_at_once(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        "name: unreachable\nengine: {engine: llamacpp, model: tiny, flags: {ctx-size: 2048}}\n"
        "client: {endpoint: completions, tokenizer: words}\nsuite: {repeats: 1, probes: {short_latency: {}}}\n"
        "objective: latency\nexecutor: {kind: ray, resource: fake_gpu}\n"
        "variants:\n  matrix:\n    baseline: base\n    changes:\n      small: {ctx-size: 1024}\n"
    )
    address = f"127.0.0.1:{free_port()}"
    done, took = _timed(_servetune("tune", str(exp), "--out", str(tmp_path / "out"), "--ray-address", address), 120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"no Ray cluster answers at {address}" in done.stderr, done.stderr
    assert took < 60, took
    print(f"\ntune --executor ray --ray-address {address}: refused in {took:.2f} s (command wall time)")


def test_sigterm_stops_a_bench_that_waits_for_a_silent_ray_address(silent: str, tmp_path: Path) -> None:
    bench = subprocess.Popen(
        _bench(silent, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        time.sleep(12)  # past the imports, into ray.init's wait for the GCS (it retries for minutes)
        assert bench.poll() is None, bench.communicate()
        t0 = time.monotonic()
        bench.send_signal(signal.SIGTERM)
        code = bench.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    _, err = bench.communicate()
    assert code == 130, err
    assert "not the main thread" not in err  # Ray's warning that it left SIGTERM alone is not shown
    print(f"\nSIGTERM during ray.init: bench exited {code} after {took:.2f} s")


def test_a_silent_ray_address_is_given_up_after_the_bound(silent: str) -> None:
    code = (
        "import sys\nfrom servetune.errors import ServetuneError\nimport servetune.load.ray_transport as rt\n"
        "rt.INIT_S = 3.0\ntry:\n    rt.connect(sys.argv[1])\nexcept ServetuneError as err:\n"
        "    print(err.problem, err.exit_code)\n"
    )
    done, took = _timed([sys.executable, "-c", code, silent], 60)
    assert f"the Ray cluster at {silent} did not let this driver join within 3 s 1" in done.stdout, done.stderr
    assert took < 30, took
