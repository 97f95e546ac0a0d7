"""Records as they finish: the journal that makes an interrupted or failed run lose nothing it measured.

`bench` hands `RecordJournal.add` to the load generator as its `on_record`: every finished request is one JSON
line, flushed at once, in the `--jsonl` file when one was asked for (the finished run then rewrites that file
whole, in request order), else in a temporary journal that a finished run deletes and an interrupted one
keeps and names. The journal also keeps the records in memory by load level, so that an interrupted run can
still print, and write, the summary of what it has (`partial_summaries`).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable
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
        if path is None:
            fd, name = tempfile.mkstemp(prefix=f"servetune-bench-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".jsonl")
            os.close(fd)
            path = Path(name)
        self.path = path
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
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
        """Closes the file; a finished run's temporary journal is deleted (its records went where asked)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if finished and not self.kept:
            self.path.unlink(missing_ok=True)
