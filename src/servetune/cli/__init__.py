"""cli room: the `servetune` command, thin faces over the other rooms behind one error boundary.

`entry.main(argv=None)` runs the command (`python -m servetune`, and in-process tests) inside the boundary that
turns a `ServetuneError` into `error:` + `fix:` and an exit code; `entry.app` is the typer application with every
command of `plan`, `engine`, `bench`, `tune`, `sim`, `demo`, `serve` and `deploy` registered, one module per group.
Each command's options are generated from its args model in its own room (`model_options.model_options`), and
the command is one call into that room.
"""


def main(argv: list[str] | None = None) -> None:
    """The console script's entry point (pyproject.toml names `servetune.cli:main`): `entry.main`, imported
    when called so that importing one of this package's modules does not import every command."""
    from servetune.cli.entry import main as run

    run(argv)
