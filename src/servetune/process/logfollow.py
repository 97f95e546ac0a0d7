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

    def flush(self) -> list[str]:
        """Everything left, including a final line without a newline (after the process ended)."""
        lines = self.new_lines()
        if self._partial:
            lines.append(self._partial.decode("utf-8", "replace"))
            self._partial = b""
        return lines


def read_text(path: Path, limit_bytes: int = 4 << 20) -> str:
    """The last `limit_bytes` of a log (whole startup logs are small; crash logs can be huge)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - limit_bytes))
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
