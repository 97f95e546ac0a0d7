"""Records as they finish: the journal that makes an interrupted or failed run lose nothing it measured.

`bench` hands `RecordJournal.add` to the load generator as its `on_record`: every finished request is one JSON
line, flushed at once, in the `--jsonl` file when one was asked for (the finished run then rewrites that file
whole, in request order), else in a temporary journal that a finished run deletes and an interrupted one
keeps and names. The journal also keeps the records in memory by load level, so that an interrupted run can
still print, and write, the summary of what it has (`partial_summaries`).

A run killed by SIGKILL runs no code to name its temporary journal, so the temporary journals live in one
folder (`journal_dir()`) and each is locked (`flock`) by the run that writes it: the next bench finds those no
living run holds (`stale_journals`), deletes the empty ones and renames the others `killed-…`, and tells where
their records are. An interrupted run names its own journal (`interrupted-…`), which is then left alone.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from servetune.metrics.record import RequestRecord
from servetune.metrics.slo import Slos
from servetune.metrics.summary import Summary, summarize


class RecordJournal:
    """Appends each finished record to a JSONL file (flushed) and keeps them by level."""

    def __init__(self, path: Path | None) -> None:
        self.kept = path is not None
        """The file is the user's (`--jsonl`), not a temporary journal."""
        self.stale: list[StaleJournal] = []
        """Journals of earlier runs that were killed before they could name theirs (found as this one starts)."""
        self._file: IO[str] | None
        if path is None:
            self.stale = stale_journals(journal_dir())
            path, self._file = _new_journal(journal_dir())
        else:
            self._file = path.open("w", encoding="utf-8")
        self.path = path
        self.levels: list[tuple[float | None, list[RequestRecord]]] = [(None, [])]
        self.started = time.monotonic()

    def start_level(self, level: float) -> None:
        """A sweep moves to its next level (the records after this belong to it)."""
        if self.levels == [(None, [])]:
            self.levels = []
        self.levels.append((level, []))

    def add(self, record: RequestRecord) -> None:
        self.levels[-1][1].append(record)
        if self._file is not None:
            self._file.write(record.model_dump_json() + "\n")
            self._file.flush()

    @property
    def count(self) -> int:
        return sum(len(records) for _, records in self.levels)

    def partial_summaries(
        self, *, slos: Slos | None, percentiles: Iterable[float]
    ) -> list[tuple[float | None, Summary]]:
        """The summary of each level that has measured records (warm-up excluded, as in a finished run)."""
        out = []
        for level, records in self.levels:
            if any(r.phase == "measure" for r in records):
                out.append((level, summarize(records, slos=slos, percentiles=tuple(percentiles))))
        return out

    def close(self, *, finished: bool) -> None:
        """Closes the file; a finished run's temporary journal is deleted (its records went where asked), an
        unfinished run's is renamed `interrupted-…` (before `path` is told: the next bench leaves it alone)."""
        if not self.kept and self._file is not None:
            if finished:
                self.path.unlink(missing_ok=True)
            else:
                kept = self.path.with_name(INTERRUPTED + self.path.name)
                self.path.rename(kept)  # while still locked: no bench starting now takes it for a killed one
                self.path = kept
        if self._file is not None:
            self._file.close()
            self._file = None


PREFIX = "bench-"
KILLED = "killed-"
INTERRUPTED = "interrupted-"


def journal_dir() -> Path:
    """The folder of bench's temporary journals (`servetune-bench` in the temp folder, private to its user)."""
    folder = Path(tempfile.gettempdir()) / f"servetune-bench-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


@dataclass(frozen=True)
class StaleJournal:
    """A journal no living run holds: its records (renamed `killed-…`), or None when it was empty and deleted."""

    path: Path | None
    records: int
    was: Path

    def note(self) -> str:
        if self.path is None:
            return f"removed the empty records journal {self.was} of a bench that was killed"
        return f"a bench that was killed left {self.records} finished records in {self.path}"


def _new_journal(folder: Path) -> tuple[Path, IO[str]]:
    """A journal locked by this process before it takes a name the next bench looks at (`bench-…`): the lock is
    held while this run lives, so no other bench takes it for a killed run's."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fd, name = tempfile.mkstemp(prefix=f".new-{stamp}-", suffix=".jsonl", dir=folder)
    handle = os.fdopen(fd, "w", encoding="utf-8")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    path = folder / f"{PREFIX}{stamp}-pid{os.getpid()}-{Path(name).stem.rsplit('-', 1)[-1]}.jsonl"
    os.rename(name, path)
    return path, handle


def stale_journals(folder: Path) -> list[StaleJournal]:
    """The journals in `folder` whose run is gone (no process holds its lock): the empty ones deleted, the others
    renamed `killed-…` (so they are told once, and kept: nothing finished is lost)."""
    found = []
    for path in sorted(folder.glob(f"{PREFIX}*.jsonl")):
        try:
            with path.open("rb") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: no run holds it any more
                records = sum(1 for line in handle if line.strip())
                if records == 0:
                    path.unlink()
                    found.append(StaleJournal(None, 0, path))
                else:
                    kept = path.with_name(KILLED + path.name)
                    path.rename(kept)
                    found.append(StaleJournal(kept, records, path))
        except BlockingIOError:  # a running bench's
            continue
        except OSError:  # gone meanwhile, or not ours to touch
            continue
    return found
