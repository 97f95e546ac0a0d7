"""The one error type users see.

Every problem caused by the user's input (a config, a flag, a server's answer) is raised as a
`ServetuneError` that names the problem and the fix; the CLI prints it without a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


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


def from_validation_error(
    err: Any,
    *,
    where: str = "",
    name: Callable[[str], str] | None = None,
    fix: str | Callable[[str], str | None] | None = None,
) -> ServetuneError:
    """The one translation of a pydantic `ValidationError` into what a user reads: where (`where`: the file or
    the command), which key or flag (`name` turns the field's dotted location into the user's spelling, e.g.
    `max_num_seqs` → `--max-num-seqs`), the value it got, what is wrong with it and the fix: one for the kind of
    error, replaced by `fix` given as text or followed by what `fix(name)` says (the option's help). `err` is
    duck-typed (its `errors()`) so this floor does not import pydantic."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()) if not str(p).startswith(("function-", "tagged-")))
    key = name(loc) if name and loc else loc
    msg = str(first.get("msg", "is not valid")).removeprefix("Value error, ")
    msg = msg[:1].lower() + msg[1:]
    got = first.get("input")
    shown = "" if isinstance(got, dict | list) or first.get("type") == "missing" else f" (got {_short(got)})"
    problem = ": ".join(part for part in (where, key, msg + shown) if part)
    known = validation_fix(first, key or "it") or f"give {key or 'it'} a valid value"
    said = f"{key}: {known}" if key else known
    if callable(fix):
        more = fix(key)
        return ServetuneError(problem, said + (f" ({more})" if more else ""))
    return ServetuneError(problem, fix or said)


def validation_fix(error: Mapping[str, Any], key: str = "it") -> str | None:
    """The fix for one pydantic error by its kind (a number, a bound, a choice, a type); None for a kind it does
    not know (the caller's own fix applies)."""
    kind = str(error.get("type", ""))
    msg = str(error.get("msg", ""))
    if kind == "missing":
        return f"add {key}"
    if kind == "extra_forbidden":
        return f"remove {key} (not a known key here)"
    if kind.startswith(("int_", "float_")):
        return "write a number without quotes or units"
    if kind.startswith("bool"):
        return "write true or false"
    if kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}:
        return f"use a value that is {msg.lower().removeprefix('input should be ')}"
    if kind.startswith("string"):
        return "write text (quote it if it looks like a number)"
    if kind in {"dict_type", "model_type"}:
        return "write a mapping (key: value lines, indented under this key)"
    if kind == "list_type":
        return "write a list, e.g. [1, 2, 4]"
    if kind == "literal_error":
        return msg.replace("Input should be", "use")
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
