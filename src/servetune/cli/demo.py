"""`servetune demo`: the README's main job on an embedded default, with nothing to download.

It shows the whole flow on this machine: the planner's verdicts for the five field-report systems, seed 001's
round 2 tuned on the simulator (seconds, every figure simulated), then a real tuning experiment (llama.cpp on a
tiny model servetune builds itself) ending in a one-screen summary; the reports are written under `--out`.
"""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Adds `demo`."""
    app.command("demo")(demo)


def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", "-o", help="Experiment folder for the tuning part."),
    fresh: bool = typer.Option(False, "--fresh", help="Start over in a new folder instead of resuming."),
    plan_only: bool = typer.Option(False, "--plan-only", help="Only plan the five seed systems (no engines)."),
) -> None:
    """Plan the five seed systems, tune seed 001's round 2 on the simulator, then tune the embedded CPU experiment
    end to end on real engines (a second run resumes the first, or starts fresh beside it: it says which)."""
    from servetune.plan.demo import run_demo as plan_seeds

    plan_seeds()
    if plan_only:
        return
    from rich.console import Console

    from servetune.demo import run_demo, summary_lines
    from servetune.report.terminal import terminal_width

    console = Console(stderr=True, width=terminal_width())
    try:
        run = run_demo(
            out,
            fresh=fresh,
            emit=lambda line: console.print(line, markup=False, highlight=False),
            width=console.width,
        )
    except KeyboardInterrupt:
        typer.secho(f"\ninterrupted: finished runs are kept in {out}; `servetune demo` again resumes them", err=True)
        raise typer.Exit(130) from None
    for line in summary_lines(run, console.width):
        typer.echo(line)
