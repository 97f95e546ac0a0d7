"""Running the CLI in-process for the fuzz tests, and what every outcome must look like."""

from __future__ import annotations

import time

import pytest

from servetune.cli.entry import main

BOUND_S = 20.0
"""No single command may take longer than this on a hostile input (the planner's 38 s `--max-num-batched-tokens
1` and its endless `--max-model-len 999999999999` were the cases of 0.1)."""


def run_cli(words: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    """(exit code, what it printed: stderr then stdout, seconds)."""
    t0 = time.monotonic()
    code = 0
    try:
        main(words)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    elapsed = time.monotonic() - t0
    captured = capsys.readouterr()
    return code, captured.err + captured.out, elapsed


def assert_clear(words: list[str], code: int, err: str, elapsed: float) -> None:
    shown = " ".join(words)
    assert "Traceback" not in err, f"traceback for: {shown}\n{err}"
    assert "failed unexpectedly" not in err, f"an uncaught error for: {shown}\n{err}"
    assert code in (0, 1, 2), f"exit {code} for: {shown}\n{err}"
    if code:  # an `error:` line, typer's usage message, or a verdict saying what failed
        said = any(word in err.lower() for word in ("error", "usage", "fail", "interrupted"))
        assert said, f"exit {code} without a message for: {shown}\n{err}"
    assert elapsed < BOUND_S, f"{elapsed:.1f} s for: {shown}"
