"""CLI of the operate room's deployment files: `deploy` (docker compose / Kubernetes / systemd, sized from
measurements). It parses and calls `servetune.operate.deploy`, which holds every rule."""

from __future__ import annotations

from pathlib import Path

import typer

from servetune.errors import ServetuneError


def _seconds(text: str | None, option: str) -> float | None:
    """A number of seconds as typed (`251`, `2.5e2`); text that is not a number is refused naming the option
    (its bounds are the deploy room's)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise ServetuneError(f"{option} must be a number of seconds, got {text!r}", f"e.g. {option} 251") from None


def register(app: typer.Typer) -> None:
    """Adds `deploy`."""

    @app.command("deploy")
    def deploy_cmd(
        source: Path = typer.Argument(..., help="Tuning folder, engine config file, or a plan JSON (plan --json)."),
        target: list[str] = typer.Option(
            [], "--target", help="compose, kubernetes, systemd or all (default); a,b or repeat the option."
        ),
        out: Path = typer.Option(None, "--out", help="Output folder (default: SOURCE/deploy for a folder)."),
        gpu: str = typer.Option(
            None, "--gpu", help="GPU type, NAME[xN] as plan takes it (default: from the tuning folder or plan)."
        ),
        gpus: int = typer.Option(None, "--gpus", help="GPUs per replica (or N in --gpu NAMExN)."),
        cold_start: str = typer.Option(
            None, "--cold-start-s", help="Measured cold start in seconds, when SOURCE has none."
        ),
        cold_start_source: str = typer.Option(None, "--cold-start-source", help="Where --cold-start-s came from."),
        name: str = typer.Option("servetune", "--name", help="Name of the deployment, services and unit."),
        slo: list[str] = typer.Option([], "--slo", help="An SLO the alerts use, e.g. ttft_p99_ms=500 (repeat)."),
    ) -> None:
        """Write deployment files (nginx, Prometheus rules and scrape config, Grafana dashboard, and docker
        compose / Kubernetes / systemd), every number sized from measurements and commented with its source."""
        from servetune.metrics.slo import parse_slos
        from servetune.operate.deploy import DeployInputs, parse_targets, write_deployment

        targets = parse_targets(target)
        inputs = DeployInputs.from_path(
            source,
            name=name,
            gpu=gpu,
            gpus=gpus,
            cold_start_s=_seconds(cold_start, "--cold-start-s"),
            cold_start_source=cold_start_source,
            slos=parse_slos(slo),
        )
        dest = out or (source / "deploy" if source.is_dir() else Path("deploy"))
        for path in write_deployment(inputs, dest, targets):
            typer.echo(str(path))
