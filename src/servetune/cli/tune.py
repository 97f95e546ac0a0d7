"""`servetune tune EXPERIMENT.yaml`, `servetune report DIR` and `servetune experiment-schema`; their options are
`tune/schema/args.py` `TuneArgs` and `report/args.py` `ReportArgs`, and each command is one call into its room."""

from __future__ import annotations

import typer

from servetune.cli.model_options import model_options
from servetune.report.args import ReportArgs
from servetune.tune.schema.args import TuneArgs


def tune(args: TuneArgs) -> None:
    """Run a tuning experiment: launch each variant, run the suite, rank by the SLOs, write the report."""
    from servetune.report.tune_run import run_tune

    raise typer.Exit(run_tune(args))


def report(args: ReportArgs) -> None:
    """Rewrite an experiment folder's reports from its store, or draw the bench report of measured runs (any tool's)."""
    from servetune.report.rewrite import write_report

    for kind, path in write_report(list(args.paths), args.out).items():
        typer.echo(f"{kind:15s} {path}")


def experiment_schema() -> None:
    """Print the experiment file's JSON schema (published as docs/experiment.schema.json)."""
    import json

    from servetune.tune.schema.experiment import Experiment

    typer.echo(json.dumps(Experiment.model_json_schema(), indent=1))


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("tune")(model_options(TuneArgs)(tune))
    app.command("report")(model_options(ReportArgs)(report))
    app.command("experiment-schema")(experiment_schema)
