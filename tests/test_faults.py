"""Faults survived (issue 16): a frozen server, an interrupted bench, a read-only or full output folder, a second
run on a locked experiment folder. Each runs the real command line as a user would.

The server under load here is `servetune mock-server` (the client's behaviour is what is tested; a frozen
engine is a stopped process either way) and, for the tuning faults, the real llama.cpp server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "SERVETUNE_CACHE": os.environ.get("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mock_url() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A mock server in its own process group (so the test can freeze it), stopped at the end."""
    port = _port()
    args = [sys.executable, "-m", "servetune", "mock-server", "--port", str(port), "--ttft-ms", "20", "--itl-ms", "5"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True, env=ENV)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "ready" in line:
            break
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def bench(
    *args: str, as_nobody: bool = False, env: dict[str, str] | None = None, **kw: object
) -> subprocess.Popen[str]:
    """`servetune bench` in its own process; `as_nobody`: as an unprivileged user (root writes anywhere, so a
    read-only folder only refuses someone else); `env`: its environment (a TMPDIR of the test's own keeps the
    journal a failed run leaves out of the machine's /tmp)."""
    cmd = [sys.executable, "-m", "servetune", "bench", "--no-progress", *args]
    if as_nobody and os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or ENV, **kw)  # type: ignore[call-overload]


def test_a_frozen_server_fails_a_bench_within_its_first_token_timeout(
    mock_url: tuple[str, subprocess.Popen[str]],
) -> None:
    url, server = mock_url
    os.killpg(server.pid, signal.SIGSTOP)  # alive, accepting connections (the kernel's backlog), answering nothing
    t0 = time.monotonic()
    proc = bench("--url", url, "--model", "mock", "--concurrency", "2", "--requests", "4", "--first-token-timeout", "5")
    out, err = proc.communicate(timeout=120)
    elapsed = time.monotonic() - t0
    print(f"\nfrozen server: bench ended after {elapsed:.1f} s with exit {proc.returncode}")
    assert proc.returncode == 1, out + err
    assert "did not answer within 5 s" in err and "frozen" in err and "Traceback" not in err
    assert elapsed < 5 + 8, f"{elapsed:.1f} s: the wait was not bounded by --first-token-timeout 5"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_bench_keeps_its_records_and_a_summary(
    signum: int, mock_url: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    url, _ = mock_url
    out_json, out_jsonl = tmp_path / "run.json", tmp_path / "records.jsonl"
    proc = bench(
        "--url", url, "--model", "mock", "--concurrency", "4", "--requests", "100000", "--output-tokens", "20",
        "--tokenizer", "words", "--json", str(out_json), "--jsonl", str(out_jsonl),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out_jsonl.exists() or out_jsonl.stat().st_size < 5000):
        time.sleep(0.2)  # records are on disk as they finish
    lines_before = len(out_jsonl.read_text().splitlines())
    assert lines_before > 5, "no record was written while the run went on"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "interrupted" in err and "records so far" in err and "PARTIAL" in out, out + err
    data = json.loads(out_json.read_text())
    assert data["partial"] is True and data["levels"][0]["summary"]["completed"] >= lines_before - 4
    records = [json.loads(line) for line in out_jsonl.read_text().splitlines()]
    assert len(records) >= lines_before and all("chunk_ns" in r for r in records)


def test_an_output_path_that_cannot_be_written_fails_before_the_run(
    mock_url: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    url, _ = mock_url
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="servetune-ro-"))  # reachable by the unprivileged user
    shared.chmod(0o755)
    readonly = shared / "ro"
    readonly.mkdir()
    readonly.chmod(0o555)
    cases = [
        ("--json", "/nonexistent/dir/x.json"),
        ("--jsonl", str(readonly / "r.jsonl")),
        ("--csv", str(tmp_path)),
    ]
    try:
        for flag, path in cases:
            t0 = time.monotonic()
            args = ["--concurrency", "1", "--requests", "200", "--output-tokens", "2", flag, path]
            proc = bench("--url", url, "--model", "mock", *args, as_nobody=True)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 2 and flag in err and "Traceback" not in err, (flag, out + err)
            assert "completed" not in out, f"{flag}: the run started before its output path was checked"
            assert time.monotonic() - t0 < 20
    finally:
        readonly.chmod(0o700)
        import shutil

        shutil.rmtree(shared)


def test_a_full_disk_loses_no_finished_record(mock_url: tuple[str, subprocess.Popen[str]], tmp_path: Path) -> None:
    """/dev/full takes the open and fails every write (ENOSPC): the run's summary is still printed, the error
    names the file, and nothing is half-written elsewhere."""
    url, _ = mock_url
    proc = bench(
        "--url", url, "--model", "mock", "--concurrency", "2", "--requests", "10", "--tokenizer", "words",
        "--json", "/dev/full", env={**ENV, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (1, 2), out + err
    assert "Traceback" not in err and ("No space left" in err or "/dev/full" in err), err


def test_a_bench_killed_by_sigkill_leaves_its_records_where_the_next_bench_names_them(
    mock_url: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    """SIGKILL runs no code: the temporary journal of a bench killed so stayed in /tmp unnamed (mkstemp). Now it
    is in bench's journal folder, locked by its run; the next bench finds it unlocked, keeps it as `killed-…`
    and says where its records are."""
    url, _ = mock_url
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "TMPDIR": str(tmp)}
    args = [sys.executable, "-m", "servetune", "bench", "--no-progress", "--url", url, "--model", "mock"]
    args += ["--tokenizer", "words", "--output-tokens", "4", "--accept-warnings"]
    killed = subprocess.Popen(
        [*args, "--concurrency", "4", "--requests", "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    folder = tmp / f"servetune-bench-{os.getuid()}"
    deadline = time.monotonic() + 60
    journals: list[Path] = []
    while time.monotonic() < deadline:
        journals = sorted(folder.glob("bench-*.jsonl")) if folder.is_dir() else []
        if journals and len(journals[0].read_text().splitlines()) >= 20:
            break
        time.sleep(0.2)
    killed.kill()
    killed.wait(timeout=30)
    assert len(journals) == 1, (journals, killed.stderr.read() if killed.stderr else "")
    journal = journals[0]
    assert f"pid{killed.pid}-" in journal.name
    left = len(journal.read_text().splitlines())
    assert left >= 20 and [p.name for p in tmp.iterdir()] == [folder.name]  # nothing loose in the temp folder
    second = subprocess.run(
        [*args, "--concurrency", "1", "--requests", "3"], capture_output=True, text=True, env=env, timeout=120
    )
    assert second.returncode == 0, second.stderr
    kept = folder / f"killed-{journal.name}"
    assert f"note: a bench that was killed left {left} finished records in {kept}" in second.stderr, second.stderr
    assert [json.loads(line)["index"] >= 0 for line in kept.read_text().splitlines()] == [True] * left
    assert [p.name for p in folder.iterdir()] == [kept.name]  # the second's own journal went with its finish
    third = subprocess.run(
        [*args, "--concurrency", "1", "--requests", "2"], capture_output=True, text=True, env=env, timeout=120
    )
    assert third.returncode == 0 and "killed" not in third.stderr, third.stderr  # told once


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real filesystem that is full: a 64 KiB tmpfs (mounting needs root; skipped where it is not permitted)
    holding an earlier `run.json` and filled to the last block."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        (folder / "run.json").write_text('{"earlier": true}')
        with open(folder / "filler", "wb", buffering=0) as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"x" * 4096)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_names_the_file_and_where_the_records_are(
    mock_url: tuple[str, subprocess.Popen[str]], full_disk: Path, tmp_path: Path
) -> None:
    """On a real full filesystem the error said only "No space left on device". It names the --json file and the
    journal that holds the run's records; the earlier file there is left whole."""
    url, _ = mock_url
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = [
        sys.executable, "-m", "servetune", "bench", "--no-progress", "--url", url, "--model", "mock", "--tokenizer",
        "words", "--concurrency", "2", "--requests", "10", "--output-tokens", "4", "--accept-warnings",
        "--json", str(full_disk / "run.json"),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env={**ENV, "TMPDIR": str(tmp)}, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr
    assert f"error: cannot write {full_disk / 'run.json'}: No space left on device" in err, err
    journals = list((tmp / f"servetune-bench-{os.getuid()}").glob("interrupted-bench-*.jsonl"))
    assert len(journals) == 1 and f"the run's records are in {journals[0]}" in err, (journals, err)
    assert len(journals[0].read_text().splitlines()) == 10
    assert "completed 10" in done.stdout and "Traceback" not in err
    assert (full_disk / "run.json").read_text() == '{"earlier": true}'
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler", "run.json"]  # no temporary file left


CANARY = "sk-canary-0f9e8d7c"


def _files_with(root: Path, needle: str) -> list[str]:
    """Every file under `root` (binary ones too: the SQLite store) whose bytes contain `needle`."""
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_a_canary_api_key_reaches_no_file_bench_writes(tmp_path: Path) -> None:
    port = _port()
    args = [sys.executable, "-m", "servetune", "mock-server", "--port", str(port), "--ttft-ms", "2", "--itl-ms", "1"]
    server = subprocess.Popen([*args, "--api-key", CANARY], stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert server.stderr is not None
    for line in server.stderr:
        if "ready" in line:
            break
    try:
        out = tmp_path / "out"
        out.mkdir()
        proc = bench(
            "--url", f"http://127.0.0.1:{port}", "--model", "mock", "--concurrency", "2", "--requests", "6",
            "--output-tokens", "4", "--api-key", CANARY, "--extra-body", json.dumps({"user": "u"}),
            "--json", str(out / "run.json"), "--jsonl", str(out / "r.jsonl"), "--csv", str(out / "r.csv"),
            "--html", str(out / "report.html"), "--save-result", "--save-detailed", "--result-dir", str(out / "vllm"),
            "--metadata", f"api_token={CANARY}", "--accept-warnings",
        )  # fmt: skip
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stdout + stderr
        assert len(list(out.rglob("*"))) >= 6, list(out.rglob("*"))
        assert not _files_with(out, CANARY), "the API key was written"
        assert CANARY not in stdout + stderr, "the API key was printed"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)


INTERRUPTED_LOOP = """
import asyncio, gc, os, signal, sys
from servetune.process.interrupts import run_coroutine

signal.signal(signal.SIGINT, signal.default_int_handler)  # a job started by `nohup` or `&` inherits it ignored
ran = []

async def probe():
    ran.append(True)

def loop_while_interrupted():  # the Ctrl-C lands while the event loop is being built (CI caught `tune` so)
    os.kill(os.getpid(), signal.SIGINT)
    return asyncio.new_event_loop()

try:
    run_coroutine(probe(), loop_factory=loop_while_interrupted)
except KeyboardInterrupt:
    gc.collect()
    print("interrupted; the probe ran:", bool(ran), file=sys.stderr)
    sys.exit(130)
"""


def test_an_interrupt_while_the_event_loop_is_built_stops_cleanly() -> None:
    """`run_coroutine` builds its loop with SIGINT held: the interrupt comes after, at a clean point; the loop is
    whole (no failing `__del__`), the coroutine that never started is closed (no "never awaited")."""
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED_LOOP], capture_output=True, text=True, timeout=60, env=ENV)
    assert proc.returncode == 130 and "interrupted; the probe ran: False" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert "never awaited" not in proc.stderr, proc.stderr
