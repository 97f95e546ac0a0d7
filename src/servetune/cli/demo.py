"""`servetune demo`: the README's main job on an embedded default, with nothing to download.

It shows the whole flow on this machine: the planner's verdicts for the five field-report systems, then a
real tuning experiment (llama.cpp and vLLM CPU engines on a tiny model servetune builds itself) that writes
summary.csv, results.json, an HTML report and a recommendation.
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
    """Plan the five seed systems, then tune the embedded CPU experiment end to end on real engines (a second run
    resumes the first, or starts fresh beside it: it says which)."""
    from servetune.plan.demo import run_demo as plan_seeds

    plan_seeds()
    if plan_only:
        return
    from rich.console import Console

    from servetune.cli.tune import print_outcome
    from servetune.demo import run_demo

    console = Console(stderr=True)
    console.rule("servetune tune: the embedded CPU experiment (examples/tune/cpu-tiny.yaml)")
    try:
        outcome, files = run_demo(
            out, fresh=fresh, emit=lambda line: console.print(line, markup=False, highlight=False)
        )
    except KeyboardInterrupt:
        typer.secho(f"\ninterrupted: finished runs are kept in {out}; `servetune demo` again resumes them", err=True)
        raise typer.Exit(130) from None
    print_outcome(outcome, files)
