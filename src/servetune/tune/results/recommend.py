"""The winner as commands a user pastes, plus the client sampling presets the experiment gives, the winner's figures,
and what the user must still do (the command builder's notes).

`plan` and `tune` print the same `vllm serve` / `docker run` lines for one config: both serve what the planner
plans for it on its GPUs (the flags it resolves, such as the attention backend vLLM needs there) and both write
them with the one call `servetune.engines.commands.launch_commands`, with the GPU count of the placement."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.commands import launch_commands
from servetune.engines.config import EngineConfig
from servetune.engines.models import resolve_model
from servetune.errors import ServetuneError
from servetune.humanize import interval
from servetune.tune.results.rank import Ranking
from servetune.tune.schema.experiment import Experiment


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
    config, gpus, planned = _served(exp, resolve_model(winner.record.variant.config))
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


def _served(exp: Experiment, config: EngineConfig) -> tuple[EngineConfig, int, list[str]]:
    """The config as `plan` serves it on the experiment's GPUs (its `serve_flags`), their count (0 on CPU), and
    a note when the planner cannot read the model (then the flags stay as measured)."""
    placed = exp.hardware.placement(config.flags)
    if placed is None or config.engine not in ("vllm", "sim"):
        return config, placed.gpus if placed else 0, []
    from servetune.plan.api import plan_for

    try:
        planned = plan_for(config, placed.gpu, placed.gpus, vllm_version=config.version, with_fixes=False)
    except ServetuneError as err:
        return (
            config,
            placed.gpus,
            [f"the flags are the measured ones: the planner could not plan them ({err.problem})"],
        )
    update = {"flags": planned.serve_flags, "version": config.version or planned.vllm_version}
    return config.model_copy(update=update), placed.gpus, []
