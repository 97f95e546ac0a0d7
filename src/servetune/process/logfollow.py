"""Reads a log file as it grows, line by line, without holding the whole file in memory twice."""

from __future__ import annotations

from pathlib import Path


class LogFollower:
    """Returns the complete lines appended to a file since the previous call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def new_lines(self) -> list[str]:
        """Lines completed since the last call (a trailing partial line waits for its newline)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        return [line.decode("utf-8", "replace").rstrip("\r") for line in complete]


def read_text(path: Path, start: int = 0, limit_bytes: int = 4 << 20) -> str:
    """The log from byte `start` on, at most its last `limit_bytes` (startup logs are small; a log that ran
    under load for hours can be huge, and its end is what explains a crash)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(start, size - limit_bytes))
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
