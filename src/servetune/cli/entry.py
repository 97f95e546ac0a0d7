"""The `servetune` command's entry: the typer `app` with every command registered, and `main`, the error boundary.

Each sibling module registers its own commands; heavy imports happen inside the command functions so that
`servetune --help` and `servetune plan` start fast. `main` is the boundary: a problem the user can fix is printed
as `error:` + `fix:` (exit 2), an environment failure likewise (exit 1: `ServetuneError.exit_code`), never a
traceback unless `--debug`.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

import typer
from typer.exceptions import TyperException

from servetune.cli import bench, demo, deploy, engine, plan, serve, sim, tune
from servetune.errors import ServetuneError, from_validation_error

app = typer.Typer(
    name="servetune",
    help="Plan, launch, measure, tune and operate LLM inference servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: an option's every spelling stays whole (vLLM's names among them)
)

for _module in (plan, engine, bench, tune, sim, demo, serve, deploy):
    _module.register(app)

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM behaves like Ctrl-C: finished work is kept and the resume hint is printed."""
    raise KeyboardInterrupt


def _say(problem: str, fix: str | None) -> None:
    typer.secho(f"error: {problem}", fg="red", err=True)
    if fix:
        typer.secho(f"  fix: {fix}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the app inside the error boundary (see the module docstring). `argv` (without the
    program name) runs it in-process, as the tests do; the signal handlers are then left as they are."""
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words or os.environ.get("SERVETUNE_DEBUG") == "1"
    words = [w for w in words if w != "--debug"]
    if argv is None:
        # Under `nohup` or `cmd &` a shell starts us with SIGINT ignored, and Python then never raises
        # KeyboardInterrupt: restore it, so Ctrl-C and the tests' SIGINT stop us cleanly wherever we were started.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _terminate)
    try:
        code = app(args=words, prog_name="servetune", standalone_mode=False)
    except typer.Exit as done:  # a command's own exit code
        sys.exit(done.exit_code)
    except TyperException as err:  # a usage error (unknown option, bad value): typer's own message
        show = getattr(err, "show", None)
        if callable(show):
            show()
        sys.exit(getattr(err, "exit_code", EXIT_USAGE))
    except (KeyboardInterrupt, typer.Abort):
        typer.secho("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except ServetuneError as err:
        if debug:
            raise
        _say(err.problem, err.fix)
        sys.exit(err.exit_code)
    except OSError as err:
        if debug:
            raise
        where = f" ({err.filename})" if err.filename else ""
        _say(f"{err.strerror or err}{where}", "check the path, its permissions and the free disk space")
        sys.exit(EXIT_FAILED)
    except Exception as err:
        if debug:
            raise
        from pydantic import ValidationError

        if isinstance(err, ValidationError):  # a value that reached a model unchecked: still the user's input
            told = from_validation_error(err, where=f"bad value for {err.title}")
            _say(told.problem, f"{told.fix} (see the command's --help)")
            sys.exit(EXIT_USAGE)
        _say(f"servetune failed unexpectedly: {type(err).__name__}: {err}", "run again with --debug and report it")
        sys.exit(EXIT_FAILED)
    sys.exit(code if isinstance(code, int) else 0)
