"""Process groups: start in a new session, stop by pgid with a grace period, prove nothing is left, no orphans."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from servetune.process.group import ProcessGroup
from servetune.process.logfollow import LogFollower
from servetune.process.ports import free_port, port_in_use
from servetune.process.proctable import group_members, living

FAMILY = "sleep 300 & sleep 300 & (sleep 300 &) ; echo started; wait"
"""A leader with children and a grandchild (re-parented to init when its subshell exits)."""


def _wait_for(pred, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_start_is_own_session_and_logs(tmp_path: Path) -> None:
    group = ProcessGroup.start(["bash", "-c", FAMILY], log_path=tmp_path / "g.log")
    try:
        assert _wait_for(lambda: "started" in (tmp_path / "g.log").read_text())
        assert os.getpgid(group.pid) == group.pid == os.getsid(group.pid)
        assert os.getpgid(0) != group.pgid
        assert _wait_for(lambda: len(group.members()) >= 4)
    finally:
        report = group.stop(grace_s=5)
    assert report.clean and report.sent_sigterm and not report.sent_sigkill
    assert not living(group_members(group.pgid))


def test_sigkill_after_grace_when_sigterm_is_ignored(tmp_path: Path) -> None:
    script = "trap '' TERM; sleep 300 & echo started; while true; do sleep 0.1; done"
    group = ProcessGroup.start(["bash", "-c", script], log_path=tmp_path / "g.log")
    assert _wait_for(lambda: "started" in (tmp_path / "g.log").read_text())
    report = group.stop(grace_s=0.5)
    assert report.sent_sigkill and report.clean
    assert 0.5 <= report.seconds < 3.0
    assert report.exit_code == -signal.SIGKILL


def test_stop_after_leader_exited_still_kills_leftovers(tmp_path: Path) -> None:
    group = ProcessGroup.start(["bash", "-c", "sleep 300 & echo started"], log_path=tmp_path / "g.log")
    assert _wait_for(lambda: group.poll() is not None)
    assert group.members()  # the leader is gone, its child is not
    report = group.stop(grace_s=2)
    assert report.already_exited and report.sent_sigterm and report.clean


def test_stop_is_idempotent(tmp_path: Path) -> None:
    group = ProcessGroup.start(["sleep", "300"], log_path=tmp_path / "g.log")
    first = group.stop(grace_s=2)
    assert group.stop(grace_s=2) is first


def test_env_is_added(tmp_path: Path) -> None:
    group = ProcessGroup.start(
        ["bash", "-c", "echo value=$SERVETUNE_X"], log_path=tmp_path / "g.log", env={"SERVETUNE_X": "42"}
    )
    assert _wait_for(lambda: group.poll() is not None)
    group.stop()
    assert "value=42" in (tmp_path / "g.log").read_text()


_PARENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from servetune.process.group import ProcessGroup
    g = ProcessGroup.start(["bash", "-c", "sleep 300 & sleep 300 & wait"], log_path=Path(sys.argv[1]))
    while len(g.members()) < 3:
        time.sleep(0.01)
    print(g.pgid, flush=True)
    {tail}
""")


def _ctrl_c_as_a_terminal_gives_it() -> None:
    """SIGINT's default in the child: under `nohup`/`cmd &` (how CI may start pytest) the shell starts us with
    SIGINT ignored, a child inherits that, and Python then never raises KeyboardInterrupt. The CLI restores it
    itself (`cli/entry.py`); this bare-library parent is started as a terminal would start it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _parent(tmp_path: Path, tail: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A servetune-like parent with an engine group of three; whatever the test's outcome, neither outlives it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _PARENT.format(tail=tail), str(tmp_path / "child.log")],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_a_terminal_gives_it,  # noqa: PLW1509 - a signal disposition, no threads involved
    )
    assert proc.stdout is not None
    pgid = 0
    try:
        pgid = int(proc.stdout.readline())
        yield proc, pgid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for m in living(group_members(pgid)) if pgid else []:
            os.kill(m.pid, signal.SIGKILL)


def test_no_orphans_when_servetune_is_terminated(tmp_path: Path) -> None:
    with _parent(tmp_path, "time.sleep(300)") as (proc, pgid):
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert _wait_for(lambda: not living(group_members(pgid)))


def test_no_orphans_when_servetune_is_interrupted(tmp_path: Path) -> None:
    with _parent(tmp_path, "time.sleep(300)") as (proc, pgid):
        proc.send_signal(signal.SIGINT)  # KeyboardInterrupt → atexit
        proc.wait(timeout=20)
        assert _wait_for(lambda: not living(group_members(pgid)))


def test_no_orphans_when_servetune_crashes(tmp_path: Path) -> None:
    with _parent(tmp_path, "raise SystemExit('crash')") as (proc, pgid):
        proc.wait(timeout=20)
        assert _wait_for(lambda: not living(group_members(pgid)))


def test_leader_dies_with_servetune_on_sigkill(tmp_path: Path) -> None:
    """SIGKILL can't be caught: PR_SET_PDEATHSIG makes the kernel SIGTERM the engine's leader."""
    with _parent(tmp_path, "time.sleep(300)") as (proc, pgid):  # at its end, it also kills bash's own
        proc.kill()  # children, which PDEATHSIG does not cover
        proc.wait(timeout=20)
        assert _wait_for(lambda: pgid not in [m.pid for m in living(group_members(pgid))])


def test_free_port_and_port_in_use() -> None:
    port = free_port()
    assert not port_in_use("127.0.0.1", port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert port_in_use("127.0.0.1", port)


def test_log_follower_returns_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    follow = LogFollower(path)
    assert follow.new_lines() == []
    path.write_bytes(b"one\ntw")
    assert follow.new_lines() == ["one"]
    with open(path, "ab") as fh:
        fh.write(b"o\nthree")
    assert follow.new_lines() == ["two"]
    assert follow.new_lines() == []  # "three" waits for its newline
