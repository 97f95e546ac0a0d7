"""`servetune tune EXPERIMENT.yaml` and `servetune report DIR` (see servetune/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("tune")(tune)
    app.command("report")(report)
    app.command("experiment-schema")(experiment_schema)


def experiment_schema() -> None:
    """Print the experiment file's JSON schema (published as docs/experiment.schema.json)."""
    import json

    from servetune.tune.experiment import Experiment

    typer.echo(json.dumps(Experiment.model_json_schema(), indent=1))


def tune(
    experiment: Path = typer.Argument(..., help="Experiment file (YAML); see docs/experiment.md."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Experiment folder (default: runs/<name>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run; finished runs are kept."),
    check: bool = typer.Option(False, "--check", help="Only validate the file and list the variants."),
) -> None:
    """Run a tuning experiment: launch each variant, run the suite, rank by the SLOs, write the report."""
    from servetune.tune.loader import load_experiment

    exp = load_experiment(experiment)
    folder = out or Path("runs") / exp.name
    if check:
        _print_plan(exp)
        return
    from rich.console import Console

    from servetune.tune.runner import run_experiment

    console = Console(stderr=True)
    try:
        outcome = run_experiment(
            exp, folder, resume=resume, emit=lambda line: console.print(line, markup=False, highlight=False)
        )
    except KeyboardInterrupt:
        typer.secho(
            f"\ninterrupted: every finished run is kept in {folder}; continue with "
            f"`servetune tune {experiment} --out {folder} --resume`",
            err=True,
        )
        raise typer.Exit(130) from None
    print_outcome(outcome)


def report(folder: Path = typer.Argument(..., help="An experiment folder written by `servetune tune`.")) -> None:
    """Rewrite the reports (CSV, JSON, markdown, HTML) of an experiment folder from its store."""
    from servetune.tune.reports import rewrite_reports

    paths = rewrite_reports(folder)
    for kind, path in paths.items():
        typer.echo(f"{kind:15s} {path}")


def _print_plan(exp: object) -> None:
    from servetune.tune.plan_view import variant_plan

    for line in variant_plan(exp):  # type: ignore[arg-type]
        typer.echo(line)


def print_outcome(outcome: object) -> None:
    from servetune.tune.runner import Outcome

    assert isinstance(outcome, Outcome)
    ranking = outcome.ranking
    typer.echo("")
    for entry in ranking.entries:
        est = entry.objective
        value = f"{est.mean:.4g}" if est else "-"
        status = entry.record.status if entry.eligible or entry.record.status != "done" else "misses SLOs"
        mark = " ★" if ranking.winner is entry else ""
        typer.echo(f"{entry.rank or '-':>3} {entry.record.variant.name:30s} {value:>10s}  {status}{mark}")
    typer.echo("")
    typer.echo(ranking.reason)
    rec_path = outcome.files.get("recommendation")
    if rec_path is not None and rec_path.exists():
        typer.echo(rec_path.read_text())
    for kind, path in outcome.files.items():
        typer.echo(f"{kind:15s} {path}")
