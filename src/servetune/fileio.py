"""Files servetune writes: atomically (a full disk or a crash leaves the old file or none, never half of one), and
into places checked before any work starts (a bad `--json /missing/dir/x.json` fails in the first second, not after
a half-hour run); a folder one process writes at a time is locked by it (`lock_folder`).

A target that exists and is not a regular file (`/dev/stdout`, a FIFO, `/dev/full`) is written in place: a rename
over it would replace the device itself. New files get the usual mode (0666 less the umask), a replaced file
keeps its own."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from servetune.errors import ServetuneError
from servetune.secrets import redact_argv


def atomic_write_text(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file in the same folder and a rename."""
    atomic_write_bytes(path, text.encode("utf-8"))


class WriteFailed(ServetuneError):
    """A file could not be written although its path was checked (the disk filled up meanwhile): the environment
    failed, not the input (exit 1)."""

    exit_code = 1


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file in the same folder and a rename. An OSError names `path`
    (`err.filename`): a write's own error names no file, and "No space left on device" alone does not say which."""
    path = Path(path)
    try:
        _atomic_write_bytes(path, data)
    except OSError as err:
        if err.filename is None or str(err.filename).startswith(str(path.parent / f".{path.name}.")):
            err.filename = str(path)
        raise


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    if path.exists() and not path.is_file():
        with path.open("wb") as out:
            out.write(data)
        return
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def ensure_writable(path: Path, what: str = "output") -> Path:
    """Checks that `path` can be written (its folder exists and takes a file) before the work that fills it."""
    try:
        return _writable(Path(path), what)
    except OSError as err:  # a folder on the way that cannot be read
        raise ServetuneError(f"cannot write the {what} {path}: {err.strerror}", "give a path you can write") from None


def _writable(path: Path, what: str) -> Path:
    if path.exists() and not path.is_file() and not path.is_dir():  # a device or FIFO: written in place
        if not os.access(path, os.W_OK):
            raise ServetuneError(f"cannot write the {what} {path}", "give a file you can write")
        return path
    folder = path.parent if path.parent != Path("") else Path(".")
    if not folder.is_dir():
        raise ServetuneError(f"cannot write the {what} {path}: {folder} is not a folder", f"create {folder} first")
    if path.is_dir():
        raise ServetuneError(f"the {what} {path} is a folder", "give a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".servetune-write-check.", dir=folder)
    except OSError as err:
        raise ServetuneError(
            f"cannot write the {what} {path}: {err.strerror}", f"choose a folder you can write to instead of {folder}"
        ) from None
    os.close(fd)
    os.unlink(tmp)
    return path


def lock_folder(folder: Path, name: str, refuse: Callable[[str], ServetuneError]) -> IO[str]:
    """Takes the exclusive lock of `folder` (an advisory `flock` on its file `name`, which the kernel drops when the
    process dies, even by SIGKILL) and returns the open lock file: closing it releases the lock. The file says who
    holds it (`servetune pid N since TIME: COMMAND`); while another process holds it, `refuse(that line)` is raised.
    Processes servetune starts do not inherit the lock (Popen closes the file in the child)."""
    lock_path = Path(folder) / name
    try:
        handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the whole run
    except OSError as err:
        raise ServetuneError(
            f"cannot write the lock file {lock_path}: {err.strerror}", "give a writable folder"
        ) from err
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another servetune process"
        handle.close()
        raise refuse(holder) from None
    handle.seek(0)
    handle.truncate()
    command = " ".join(redact_argv(sys.argv))  # `serve -- --api-key K`: the file is readable by others
    handle.write(f"servetune pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}: {command}\n")
    handle.flush()
    return handle
