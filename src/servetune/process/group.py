"""Start a command as its own process group with a log file; stop it by its pgid and prove nothing is left.

Never matches processes by name: the group id (= session id, since each engine gets a new session) is the only
handle, so two servetune runs, or a user's own vLLM, are never touched.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, computed_field

from servetune.process import reaper
from servetune.process.proctable import group_members, living

_PR_SET_PDEATHSIG = 1
POLL_S = 0.01


class TeardownReport(BaseModel):
    """How a stop went: what was sent, how long it took, and which pids (if any) survived."""

    model_config = ConfigDict(frozen=True)

    pgid: int
    grace_s: float
    already_exited: bool
    sent_sigterm: bool
    sent_sigkill: bool
    seconds: float
    exit_code: int | None
    survivors: list[int]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def clean(self) -> bool:
        """True when no process of the group is left (zombies awaiting their reaper count as gone)."""
        return not self.survivors


def _die_with_parent_argv(argv: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """Makes the kernel SIGTERM the engine when servetune dies, even by SIGKILL (PR_SET_PDEATHSIG).

    util-linux's `setpriv --pdeathsig` sets it and execs the engine, so no Python runs between fork and exec
    (a `preexec_fn` can deadlock when other threads hold locks at fork time); without setpriv, a preexec
    calls prctl through a function resolved beforehand.
    """
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--pdeathsig", "TERM", "--", *argv], None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return argv, None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent already died between fork and prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return argv, preexec


class ProcessGroup:
    """A running command in its own session/process group, logging stdout+stderr to `log_path`."""

    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid
        self.log_path = log_path
        self.started_at = time.monotonic()
        self._report: TeardownReport | None = None
        self._stop_lock = threading.Lock()

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> ProcessGroup:
        """Starts `argv` in a new session; `env` is added to servetune's own environment; `pass_fds` stay open in
        the child (a load worker's end of its socket to the coordinator)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        full_env = {**os.environ, **(env or {})}
        cmd, preexec = list(argv), None
        # PDEATHSIG fires when the *thread* that forked exits, so only use it from the main thread.
        if threading.current_thread() is threading.main_thread():
            cmd, preexec = _die_with_parent_argv(cmd)
        with open(log_path, "ab", buffering=0) as log:
            popen = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - only PR_SET_PDEATHSIG, async-signal-safe
                pass_fds=tuple(pass_fds),
            )
        group = cls(popen, log_path)
        reaper.register(group.pgid, group)
        return group

    def poll(self) -> int | None:
        """The leader's exit code, or None while it runs."""
        return self._popen.poll()

    def alive(self) -> bool:
        """True while the leader runs."""
        return self._popen.poll() is None

    def describe_end(self, name: str) -> str:
        """`NAME (pid N) exited with code C` / `was killed by signal S` / `stopped answering` (it still runs), with
        the last line of its log (a traceback's message): why a helper process ended, for a report."""
        code = self.poll()
        if code is None:
            how = "stopped answering"
        elif code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return f"{name} (pid {self.pid}) {how}" + (f": {lines[-1][:200]}" if lines else "")

    def members(self) -> list[int]:
        """Pids of the group's (and session's) living processes."""
        return [m.pid for m in living(group_members(self.pgid))]

    def stop(self, grace_s: float = 10.0) -> TeardownReport:
        """SIGTERM to the group, SIGKILL after `grace_s`, then verify that no member is left.

        SIGCONT follows the SIGTERM (as systemd does): a stopped (SIGSTOPped, frozen) member would otherwise hold
        the SIGTERM pending and only die by the SIGKILL, without its own shutdown."""
        with self._stop_lock:
            if self._report is not None:
                return self._report
            t0 = time.monotonic()
            already = self._popen.poll() is not None
            sent_term = sent_kill = False
            if self.members():
                sent_term = self._signal(signal.SIGTERM)
                self._signal(signal.SIGCONT)
                if not self.wait_gone(grace_s):
                    sent_kill = self._signal(signal.SIGKILL)
                    self.wait_gone(5.0)
            try:
                code = self._popen.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
            self._report = TeardownReport(
                pgid=self.pgid,
                grace_s=grace_s,
                already_exited=already,
                sent_sigterm=sent_term,
                sent_sigkill=sent_kill,
                seconds=round(time.monotonic() - t0, 4),
                exit_code=code,
                survivors=self.members(),
            )
            reaper.forget(self.pgid)
            return self._report

    def _signal(self, sig: signal.Signals) -> bool:
        sent = False
        try:
            os.killpg(self.pgid, sig)
            sent = True
        except ProcessLookupError:
            pass
        for member in living(group_members(self.pgid)):  # session members that moved to a group of their own
            if member.pgid == self.pgid:
                continue
            try:
                os.kill(member.pid, sig)
                sent = True
            except ProcessLookupError:
                pass
        return sent

    def wait_gone(self, timeout_s: float) -> bool:
        """Waits up to `timeout_s` for every member of the group to exit on its own (the leader reaped); True when
        none is left. Once the group is gone nothing writes its log any more: what it said is all there."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._popen.poll()  # reap the leader so it does not linger as a zombie
            if not self.members():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
