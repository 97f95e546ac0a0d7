"""cli room: the `servetune` command, thin faces over the other rooms behind one error boundary.

`main(argv=None)` runs the command (the console script, `python -m servetune`, and in-process tests) inside the
boundary that turns a `ServetuneError` into `error:` + `fix:` and an exit code; `app` is the typer application with
every command of `plan`, `engine`, `bench`, `tune`, `sim`, `demo` and `serve` registered (both live in `entry`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.cli.entry import app as app, main as main
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "app": "entry",
            "main": "entry",
        },
    )
