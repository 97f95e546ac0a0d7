"""Failure classes: why an engine did not come up (or died), with the log lines that prove it and a fix.

Patterns are per engine (each adapter lists its own); `classify` picks the first class whose pattern matches
the log, so specific classes are listed before generic ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError

if TYPE_CHECKING:
    from servetune.process.group import TeardownReport

FailureClass = Literal[
    "weights_oom",
    "kv_too_small",
    "warmup_oom",
    "no_cache_memory",
    "unsupported_model",
    "invalid_flag",
    "port_in_use",
    "model_missing",
    "exited_early",
    "startup_timeout",
    "died_under_load",
    "engine_hung",
    "flag_not_applied",
]

RESTART_CANNOT_CURE: frozenset[str] = frozenset({"model_missing", "invalid_flag", "unsupported_model"})
"""Failures of the config itself (its model, its flags): the same config fails the same way however often it is
started again, so a supervisor falls back or stops instead of retrying it."""


class FailureInfo(BaseModel):
    """One diagnosed failure: its class, the log excerpt that proves it, and what to do."""

    model_config = ConfigDict(frozen=True)

    klass: FailureClass
    excerpt: str
    hint: str
    suggested_max_model_len: int | None = None
    exit_code: int | None = None


class EngineLaunchError(ServetuneError):
    """An engine failed to start (or died); `.failure` says why, with proof from its log (a failed run: exit 1)."""

    exit_code = 1

    def __init__(self, failure: FailureInfo, log_path: str | None = None) -> None:
        where = f" (log: {log_path})" if log_path else ""
        super().__init__(f"engine failed: {failure.klass}{where}\n{failure.excerpt}", failure.hint)
        self.failure = failure
        self.log_path = log_path
        self.teardown: TeardownReport | None = None
        """The TeardownReport of the failed launch's process group (set by `launch`)."""


@dataclass(frozen=True)
class Pattern:
    """A failure class recognised by a regex over the log; `hint` may use the match (e.g. vLLM's length)."""

    klass: FailureClass
    regex: re.Pattern[str]
    hint: Callable[[re.Match[str]], str] | str
    suggested_len_group: str | None = None


def pattern(
    klass: FailureClass, regex: str, hint: Callable[[re.Match[str]], str] | str, suggested_len_group: str | None = None
) -> Pattern:
    """Builds a `Pattern` (multiline, so `^`/`$` anchor at lines)."""
    return Pattern(klass, re.compile(regex, re.MULTILINE), hint, suggested_len_group)


GENERIC_PATTERNS: tuple[Pattern, ...] = (
    pattern(
        "exited_early",
        r"setpriv: failed to execute .*",
        "The engine command could not be started: is the engine installed in this environment (or is "
        "SERVETUNE_LLAMA_SERVER pointing at a real binary)?",
    ),
    pattern(
        "port_in_use",
        r"Address already in use|\[Errno 98\]|couldn't bind HTTP server socket|"
        r"failed to bind",
        "Another process holds the port: pick another --port (or leave it out to get a "
        "free one), or stop what is listening there.",
    ),
)

EXCERPT_CONTEXT_LINES = 2
EXCERPT_MAX_CHARS = 1500


def excerpt_around(text: str, start: int, end: int) -> str:
    """The matching lines plus a little context before them, trimmed to a readable size."""
    lines = text.split("\n")  # not splitlines(): progress bars' "\r" would shift the line numbers
    first = text.count("\n", 0, start)
    last = text.count("\n", 0, end)
    chunk = "\n".join(lines[max(0, first - EXCERPT_CONTEXT_LINES) : last + 1])
    return chunk[-EXCERPT_MAX_CHARS:]


def classify_log(text: str, patterns: Sequence[Pattern]) -> FailureInfo | None:
    """The first pattern (in order) that matches the log, as a FailureInfo; None when nothing matches.

    Searches from the end of the log, since the cause of a crash is near its end and early lines may quote
    harmless warnings that look alike.
    """
    for pat in (*patterns, *GENERIC_PATTERNS):
        matches = list(pat.regex.finditer(text))
        if not matches:
            continue
        m = matches[-1]
        hint = pat.hint(m) if callable(pat.hint) else pat.hint
        suggested = int(m.group(pat.suggested_len_group)) if pat.suggested_len_group else None
        return FailureInfo(
            klass=pat.klass,
            excerpt=excerpt_around(text, m.start(), m.end()),
            hint=hint,
            suggested_max_model_len=suggested,
        )
    return None


def tail_excerpt(text: str, lines: int = 12) -> str:
    """The last lines of a log (the proof for classes that have no telling line of their own)."""
    return "\n".join(text.rstrip().split("\n")[-lines:])[-EXCERPT_MAX_CHARS:]
