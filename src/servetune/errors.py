"""The one error type users see.

Every problem caused by the user's input (a config, a flag, a server's answer) is raised as a
`ServetuneError` that names the problem and the fix; the CLI prints it without a traceback.
"""

from __future__ import annotations


class ServetuneError(Exception):
    """A problem the user can fix: `problem` says what is wrong, `fix` what to do about it. `exit_code` is what
    the CLI exits with: 2 for bad input (the default), 1 where the run failed on its environment (a server that
    is frozen or gone, an engine that died)."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return self.problem if not self.fix else f"{self.problem}\n  fix: {self.fix}"
