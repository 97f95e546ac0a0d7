"""`servetune tune EXPERIMENT.yaml`, `servetune report DIR` and `servetune experiment-schema`."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer

from servetune.errors import ServetuneError


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    app.command("tune")(tune)
    app.command("report")(report)
    app.command("experiment-schema")(experiment_schema)


def experiment_schema() -> None:
    """Print the experiment file's JSON schema (published as docs/experiment.schema.json)."""
    from servetune.tune.schema.experiment import Experiment

    typer.echo(json.dumps(Experiment.model_json_schema(), indent=1))


def tune(
    experiment: Path = typer.Argument(..., help="Experiment file (YAML); see docs/experiment.md."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Experiment folder (default: runs/<name>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run; finished runs are kept."),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Resume, and run variants that failed (a transient crash) again."
    ),
    check: bool = typer.Option(False, "--check", help="Only validate the file and print the plan (nothing launches)."),
    as_json: bool = typer.Option(False, "--json", help="With --check: print the plan as JSON."),
    executor: str | None = typer.Option(
        None,
        "--executor",
        help="Where launches run: local (one at a time, here), local-gpus (side by side on this host's GPUs), "
        "ray (as Ray tasks on a cluster's nodes). Default: the file's `executor`, else local.",
    ),
    gpus: str | None = typer.Option(None, "--gpus", help="local-gpus: the GPU ids to share out, e.g. 0,1,2,3."),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="ray: the cluster's address (default RAY_ADDRESS, else auto)."
    ),
    ray_resource: str | None = typer.Option(
        None, "--ray-resource", help="ray: the resource a launch asks for per GPU (default GPU; a custom one on CPUs)."
    ),
) -> None:
    """Run a tuning experiment: launch each variant, run the suite, rank by the SLOs, write the report."""
    from servetune.tune.schema.loader import load_experiment, with_executor

    exp = with_executor(
        load_experiment(experiment), kind=executor, gpus=gpus, address=ray_address, resource=ray_resource
    )
    folder = out or Path("runs") / exp.name
    if check:
        from servetune.tune.loop import default_feasibility
        from servetune.tune.search.estimates import predictor
        from servetune.tune.search.plan import plan_experiment

        plan = plan_experiment(
            exp,
            feasibility=default_feasibility(exp),
            predictor=predictor(exp) if exp.estimate.mode != "off" else None,
        )
        typer.echo(json.dumps(plan.to_json(), indent=2) if as_json else "\n".join(plan.lines()))
        return
    from rich.console import Console

    from servetune.report.files import write_outcome
    from servetune.tune.loop import run_experiment

    console = Console(stderr=True)
    try:
        outcome = run_experiment(
            exp,
            folder,
            resume=resume,
            retry_failed=retry_failed,
            emit=lambda line: console.print(line, markup=False, highlight=False),
        )
    except KeyboardInterrupt:
        from servetune.report.rewrite import rewrite_reports

        written = ""
        with contextlib.suppress(ServetuneError, OSError, KeyError):  # the finished runs' reports, readable at once
            written = f" (reports of the finished runs: {rewrite_reports(folder)['html']})"
        typer.secho(
            f"\ninterrupted: every finished run is kept in {folder}{written}; continue with "
            f"`servetune tune {experiment} --out {folder} --resume`",
            err=True,
        )
        raise typer.Exit(130) from None
    print_outcome(outcome, write_outcome(exp, outcome))
    failed = outcome.nothing_succeeded()
    if failed:
        typer.secho(f"tune: {failed}", fg="red", err=True)
        raise typer.Exit(1)


def report(
    paths: list[Path] = typer.Argument(
        ...,
        help="An experiment folder (`servetune tune --out`), a bench folder (`bench --save-result --result-dir`), "
        "or result files of vllm bench serve, GuideLLM or AIPerf.",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Where the reports go (default: the folder; a bench report in an experiment's folder is "
        "bench-report.html).",
    ),
) -> None:
    """Rewrite an experiment folder's reports from its store, or draw the bench report of measured runs (any tool's)."""
    from servetune.report.rewrite import write_report

    for kind, path in write_report(paths, out).items():
        typer.echo(f"{kind:15s} {path}")


def print_outcome(outcome: object, files: dict[str, Path]) -> None:
    """The ranking with a header and units, the reason once, the recommendation and where the files are."""
    from servetune.report.terminal import outcome_lines
    from servetune.tune.loop import Outcome

    assert isinstance(outcome, Outcome)
    for line in outcome_lines(outcome.ranking, files):
        typer.echo(line)
