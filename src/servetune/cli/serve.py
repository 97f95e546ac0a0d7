"""CLI of the operate room: `serve` (supervised engine behind nginx; `--switch NEW` for blue-green)."""

from __future__ import annotations

import typer

from servetune.cli.model_options import PASSTHROUGH, model_options
from servetune.operate.serve_options import ServeArgs


def register(app: typer.Typer) -> None:
    """Adds `serve`."""

    @app.command("serve", context_settings=PASSTHROUGH)
    @model_options(ServeArgs, exclude={"sizing"})
    def serve_cmd(ctx: typer.Context, args: ServeArgs) -> None:
        """Serve a config under supervision behind nginx until SIGTERM/Ctrl-C (drains in-flight streams)."""
        from servetune.operate.serving import serve

        raise typer.Exit(serve(args, list(ctx.args), say=lambda line: typer.echo(line, err=True)))
