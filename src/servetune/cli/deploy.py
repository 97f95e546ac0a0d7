"""CLI of the operate room's deployment files: `deploy` (docker compose / Kubernetes / systemd, sized from
measurements); its options are `operate/deploy_args.py` `DeployArgs`, and `operate/deploy.py` `deploy` does
what they ask."""

from __future__ import annotations

import typer

from servetune.cli.model_options import model_options
from servetune.operate.deploy_args import DeployArgs


def deploy_cmd(args: DeployArgs) -> None:
    """Write deployment files (nginx, Prometheus rules and scrape config, Grafana dashboard, and docker
    compose / Kubernetes / systemd), every number sized from measurements and commented with its source."""
    from servetune.operate.deploy import deploy

    for path in deploy(args):
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Adds `deploy`."""
    app.command("deploy")(model_options(DeployArgs)(deploy_cmd))
