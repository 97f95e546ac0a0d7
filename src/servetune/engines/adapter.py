"""What every engine adapter provides: argv, environment, version, log facts, failure patterns, progress.

Adapters are small stateless objects; `registry.adapter_for(name)` returns the one for an engine name.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import Pattern


class EngineAdapter(ABC):
    """One engine's conventions."""

    name: str
    progress_patterns: Sequence[re.Pattern[str]] = ()
    """Log lines worth showing a user while the engine starts (loading, profiling, capturing...)."""

    @abstractmethod
    def argv(self, cfg: EngineConfig, host: str, port: int) -> list[str]:
        """The command line that starts this engine serving `cfg` on host:port."""

    def env(self, cfg: EngineConfig, host: str) -> dict[str, str]:
        """Environment added to servetune's own (cfg.env wins over adapter defaults)."""
        return dict(cfg.env)

    @abstractmethod
    def version(self) -> str | None:
        """The installed engine's version, without starting it (None when unknown)."""

    @abstractmethod
    def parse_log(self, text: str) -> EngineFacts:
        """Startup facts from the engine's log."""

    @abstractmethod
    def failure_patterns(self) -> Sequence[Pattern]:
        """Failure classes this engine's log can show, most specific first."""

    def progress(self, line: str) -> str | None:
        """A short progress message for a log line (one screen line at most), or None when the line is not
        worth showing: some milestone lines (vLLM's engine config) run to thousands of characters."""
        for pat in self.progress_patterns:
            if pat.search(line):
                msg = strip_log_prefix(line)
                return msg if len(msg) <= PROGRESS_WIDTH else msg[: PROGRESS_WIDTH - 1] + "…"
        return None


PROGRESS_WIDTH = 160
"""The longest progress message a launch reports."""

_PREFIX = re.compile(
    r"^\d+\.\d+\.\d+\.\d+ [IWE] "
    r"|^(?:\(\w+ pid=\d+\)\s*)?(?:(?:INFO|WARNING|ERROR|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\]\s*)?"
)


def strip_log_prefix(line: str) -> str:
    """Drops vLLM's `(EngineCore pid=..) INFO 11-30 12:00:00 [file.py:1]` and llama.cpp's time prefix."""
    return _PREFIX.sub("", line, count=1).strip()


def last_float(pattern: re.Pattern[str], text: str, group: int = 1) -> float | None:
    """The last match's group as a float (later lines win: engines repeat facts when they restart parts)."""
    matches = pattern.findall(text)
    if not matches:
        return None
    m = matches[-1]
    value = m[group - 1] if isinstance(m, tuple) else m
    return float(value.replace(",", ""))


def last_int(pattern: re.Pattern[str], text: str, group: int = 1) -> int | None:
    """Like `last_float`, as an int."""
    value = last_float(pattern, text, group)
    return None if value is None else int(value)


def first_int(pattern: re.Pattern[str], text: str, group: int = 1) -> int | None:
    """The first match's group as an int, for facts whose later repeats describe something else."""
    m = pattern.search(text)
    return None if m is None else int(m.group(group).replace(",", ""))


def installed_version(*dists: str) -> str | None:
    """The version of the first installed distribution among `dists` (no import of the engine itself)."""
    from importlib import metadata

    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None
