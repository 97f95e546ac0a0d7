"""Executor `local`: one launch group at a time, in this process, writing the store itself. Its queue is the
`replay` executor's too, which answers each group from a table instead of launching it."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from servetune.tune.execution.session import LaunchSession
from servetune.tune.results.store import Store
from servetune.tune.schema.variants import Variant


class LocalExecutor:
    """One launch group at a time, here, in this process; `_run` is what happens to a group (a subclass answers
    it another way: `replay`)."""

    def __init__(self) -> None:
        self._queued: deque[list[Variant]] = deque()
        self._session: LaunchSession | None = None

    def bind(self, session: LaunchSession, store: Store) -> None:
        self._session = session

    def has_room(self) -> bool:
        return not self._queued

    def submit(self, group: Sequence[Variant]) -> None:
        self._queued.append(list(group))

    def wait(self) -> list[Variant] | None:
        if not self._queued:
            return None
        assert self._session is not None, "bind() first"
        group = self._queued.popleft()
        self._run(self._session, group)
        return group

    def _run(self, session: LaunchSession, group: list[Variant]) -> None:
        session.run(group)

    def close(self) -> None:
        self._queued.clear()
