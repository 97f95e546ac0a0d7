"""The winner as commands a user pastes, plus the client sampling presets the experiment gives, the winner's figures,
and what the user must still do (the command builder's notes).

`plan` and `tune` print the same `vllm serve` / `docker run` lines for one config: both serve what the planner
plans for it on its GPUs (the flags it resolves, such as the attention backend vLLM needs there; for a variant,
planned once, with the planner's verdict before its launch: `Variant.served`) and both write them with the one call
`servetune.engines.commands.launch_commands`, with the GPU count of the placement."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.commands import launch_commands
from servetune.engines.config import EngineConfig
from servetune.engines.models import resolve_model
from servetune.humanize import interval
from servetune.tune.results.rank import Ranking
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    variant: str
    reason: str
    serve_command: str
    docker_command: str | None
    notes: list[str] = []
    sampling_presets: dict[str, dict[str, Any]]
    figures: dict[str, str]
    confirmed: str | None = None
    """The winner's confirmation: its figure as first measured, as re-measured, and the inflation."""


def recommend(exp: Experiment, ranking: Ranking) -> Recommendation | None:
    """The ranking's winner as ready commands (None when nothing met the SLOs)."""
    winner = ranking.winner
    if winner is None:
        return None
    config, gpus, planned = _served(exp, winner.record.variant)
    deploy = exp.deploy
    serve, docker = launch_commands(
        config,
        gpus=gpus,
        image=deploy.image,
        port=deploy.port,
        host_model_dir=deploy.host_model_dir,
        container_name=deploy.container_name,
    )
    figures = {
        f"{probe}.{name}": interval(est.mean, est.half_width if est.n > 1 else None)
        for (probe, name), est in sorted(winner.figures.items())
    }
    notes = list(dict.fromkeys((*planned, *serve.notes, *(docker.notes if docker else ()))))
    label = ranking.objective.label
    confirmed = next(
        (c.text(label) for c in ranking.confirmations if c.confirmed_as == winner.record.variant.name), None
    )
    return Recommendation(
        variant=winner.record.variant.name,
        reason=ranking.reason,
        serve_command=serve.text,
        docker_command=docker.text if docker else None,
        notes=notes,
        sampling_presets=exp.sampling_presets,
        figures=figures,
        confirmed=confirmed,
    )


def _served(exp: Experiment, variant: Variant) -> tuple[EngineConfig, int, list[str]]:
    """The config as `plan` serves it on the experiment's GPUs (the planner's serve flags, decided with its verdict
    before the launch), their count (0 on CPU), and a note where the planner did not plan it (then the flags stay
    as measured)."""
    config = variant.served or variant.config
    placed = exp.hardware.placement(config.flags)
    gpus = placed.gpus if placed else 0
    if variant.served is None and placed is not None and config.engine in ("vllm", "sim"):
        return resolve_model(config), gpus, ["the flags are the measured ones: the planner did not plan this config"]
    return resolve_model(config), gpus, []
