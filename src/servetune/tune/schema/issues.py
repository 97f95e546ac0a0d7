"""`Issue`: one problem found in an experiment file — where (a key path), what, and how to fix it.

Its own module so that the loader (which formats issues with line numbers) and the checks (which find them)
both import it and neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Issue:
    """One problem in an experiment file."""

    path: KeyPath
    problem: str
    fix: str
