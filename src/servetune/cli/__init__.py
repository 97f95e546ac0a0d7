"""The `servetune` command: thin commands over the rooms of the package.

Each sub-module registers its own commands; heavy imports happen inside the command functions so
that `servetune --help` and `servetune plan` start fast.
"""

from __future__ import annotations

import sys

import typer

from servetune.cli import bench, demo, engine, plan, serve, sim, tune
from servetune.errors import ServetuneError

app = typer.Typer(
    name="servetune",
    help="Plan, launch, measure, tune and operate LLM inference servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in (plan, engine, bench, tune, sim, demo, serve):
    _module.register(app)


def main() -> None:
    """Entry point: runs the app and turns user errors into a message without a traceback."""
    try:
        app()
    except ServetuneError as err:
        typer.secho(f"error: {err.problem}", fg="red", err=True)
        if err.fix:
            typer.secho(f"  fix: {err.fix}", err=True)
        sys.exit(2)
