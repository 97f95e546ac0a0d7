"""Executors run a batch's launch groups (each a `LaunchSession.run`). `LocalExecutor` runs them one after another
on this machine; executors that spread groups over GPU slots or a Ray cluster implement the same `run`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from servetune.tune.session import LaunchSession
from servetune.tune.variants import Variant


class Executor(Protocol):
    """Runs launch groups; every finished probe run reaches the session's store as it finishes."""

    def run(self, groups: Sequence[Sequence[Variant]], session: LaunchSession) -> None: ...


class LocalExecutor:
    """One launch group at a time, here."""

    def run(self, groups: Sequence[Sequence[Variant]], session: LaunchSession) -> None:
        for group in groups:
            session.run(list(group))
