#!/usr/bin/env python3
"""`scripts/cpu_hog.py [--cores N] [--times K] -- CMD...`: CMD under a busy loop per core, the hog stopped by its group.

Why: a test that passes only on an idle machine is a flaky test; `--times 3` is "passes three times in a row under a
CPU hog" (the exit code is the first failing run's, else 0). The hog is one process group in a session of its own, so
it is stopped by its id, never by name, also when this script is interrupted (SIGINT, SIGTERM, SIGHUP).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time

HOG = """import os, sys
for _ in range(int(sys.argv[1]) - 1):
    if os.fork() == 0:
        break
while True:
    pass
"""
"""The hog's program: it forks the other busy loops itself, so all of them stay in the group it leads."""


def start_hog(cores: int) -> subprocess.Popen[bytes]:
    """`cores` busy loops in one new session and process group, led by the returned process."""
    return subprocess.Popen([sys.executable, "-c", HOG, str(cores)], start_new_session=True)


def stop_hog(hog: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the hog's group (busy loops hold no state worth a graceful stop); the leader is reaped here, its
    forked loops by init once their parent is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(hog.pid, signal.SIGKILL)
    hog.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="busy loops (default: one per core)")
    p.add_argument("--times", type=int, default=1, help="runs of the command in a row; stops at the first failure")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    args = p.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd or args.cores < 1 or args.times < 1:
        p.error("give --cores >= 1, --times >= 1 and a command after --")
    # SIGTERM/SIGHUP end this script through the `finally` below, so the hog never outlives it.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    hog = start_hog(args.cores)
    print(f"cpu_hog: {args.cores} busy loop(s) in process group {hog.pid}", file=sys.stderr, flush=True)
    try:
        for n in range(1, args.times + 1):
            t0 = time.monotonic()
            code = subprocess.call(cmd)
            print(f"cpu_hog: run {n}/{args.times} exited {code} in {time.monotonic() - t0:.1f} s", file=sys.stderr)
            if code != 0:
                return code
        return 0
    finally:
        stop_hog(hog)


if __name__ == "__main__":
    sys.exit(main())
