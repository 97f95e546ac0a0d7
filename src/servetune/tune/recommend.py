"""The winner as commands a user pastes — written by the one emitter (`servetune.engines.commands`), so `plan` and
`tune` print the same `vllm serve` / `docker run` / `llama-server` lines — plus the client sampling presets the
experiment gives, the winner's figures, and what the user must still do (the emitter's notes)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.commands import docker_command, serve_command
from servetune.engines.models import resolve_model
from servetune.humanize import number
from servetune.tune.experiment import Experiment
from servetune.tune.rank import Ranking


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    variant: str
    reason: str
    serve_command: str
    docker_command: str | None
    notes: list[str] = []
    sampling_presets: dict[str, dict[str, Any]]
    figures: dict[str, str]


def recommend(exp: Experiment, ranking: Ranking) -> Recommendation | None:
    """The ranking's winner as ready commands (None when nothing met the SLOs)."""
    winner = ranking.winner
    if winner is None:
        return None
    config = resolve_model(winner.record.variant.config)
    serve = serve_command(config)
    docker = None
    if config.engine in ("vllm", "sim"):
        deploy = exp.deploy
        docker = docker_command(
            config,
            image=deploy.image,
            port=deploy.port,
            host_model_dir=deploy.host_model_dir,
            container_name=deploy.container_name,
            gpus=exp.hardware.gpus_for(config.flags) or "all",
        )
    figures = {
        f"{probe}.{name}": number(est.mean, 4) + ("" if est.n < 2 else f" ± {number(est.half_width, 2)}")
        for (probe, name), est in sorted(winner.figures.items())
    }
    notes = list(dict.fromkeys((*serve.notes, *(docker.notes if docker else ()))))
    return Recommendation(
        variant=winner.record.variant.name,
        reason=ranking.reason,
        serve_command=serve.text,
        docker_command=docker.text if docker else None,
        notes=notes,
        sampling_presets=exp.sampling_presets,
        figures=figures,
    )
