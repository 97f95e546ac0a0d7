"""The winner as commands a user pastes: `vllm serve …` and `docker run … vllm/vllm-openai …` (or
`llama-server …`), plus the client sampling presets the experiment gives."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.engines.flags import flags_to_argv
from servetune.tune.experiment import Deploy, Experiment
from servetune.engines.models import resolve_model
from servetune.tune.rank import Ranking


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    variant: str
    reason: str
    serve_command: str
    docker_command: str | None
    sampling_presets: dict[str, dict[str, Any]]
    figures: dict[str, str]


def _multiline(head: list[str], flags: list[str]) -> str:
    """A shell command with one flag (and its value) per line, the way the seeds write them."""
    lines, current = [" ".join(shlex.quote(a) for a in head)], []
    for arg in flags:
        if arg.startswith("-") and current:
            lines.append(" ".join(current))
            current = []
        current.append(shlex.quote(arg))
    if current:
        lines.append(" ".join(current))
    return " \\\n  ".join(lines)


def deployable(config: EngineConfig) -> EngineConfig:
    """The config a user deploys: a `sim` variant becomes the real vLLM launch it simulates, without the
    simulator's own flags (`--gpu`, `--time-scale`, `--calibration`, ...: vLLM would refuse them)."""
    if config.engine != "sim":
        return config
    from servetune.sim.flags import SIM_ONLY_FLAGS

    flags = {name: value for name, value in config.flags.items() if name not in SIM_ONLY_FLAGS}
    return config.model_copy(update={"engine": "vllm", "flags": flags})


def serve_command(config: EngineConfig) -> str:
    if config.engine == "llamacpp":
        return _multiline(["llama-server"], ["--model", config.model, *flags_to_argv(config.flags, "omit")])
    named = ["--served-model-name", config.served_model_name] if config.served_model_name else []
    cmd = _multiline(["vllm", "serve", config.model], named + flags_to_argv(config.flags))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in config.env.items())
    return f"{env} {cmd}" if env else cmd


def docker_command(config: EngineConfig, deploy: Deploy, gpus: int | None) -> str | None:
    """The `docker run` form for vLLM (None for other engines); the model folder is mounted read-only."""
    if config.engine not in {"vllm", "sim"}:
        return None
    opts = ["--name", deploy.container_name, "--restart", "unless-stopped"]
    if gpus:
        opts += ["--runtime", "nvidia", "--gpus", "all"]
    opts += ["--shm-size", "16g", "--ipc", "host", "-p", f"{deploy.port}:8000"]
    if deploy.host_model_dir:
        opts += ["-v", f"{deploy.host_model_dir}:{config.model}:ro"]
    for key, value in config.env.items():
        opts += ["-e", f"{key}={value}"]
    named = ["--served-model-name", config.served_model_name] if config.served_model_name else []
    docker = _multiline(["docker", "run", "-d"], opts)
    image = deploy.image or (f"vllm/vllm-openai:v{config.version}" if config.version else "vllm/vllm-openai:latest")
    serve = _multiline([image], ["--model", config.model, *named, *flags_to_argv(config.flags)])
    return f"{docker} \\\n  {serve}"


def recommend(exp: Experiment, ranking: Ranking) -> Recommendation | None:
    """The ranking's winner as ready commands (None when nothing met the SLOs)."""
    winner = ranking.winner
    if winner is None:
        return None
    config = deployable(resolve_model(winner.record.variant.config))
    gpus = exp.hardware.gpus or None
    figures = {
        f"{probe}.{name}": f"{est.mean:.4g}" + ("" if est.n < 2 else f" ± {est.half_width:.2g}")
        for (probe, name), est in sorted(winner.figures.items())
    }
    return Recommendation(
        variant=winner.record.variant.name,
        reason=ranking.reason,
        serve_command=serve_command(config),
        docker_command=docker_command(config, exp.deploy, gpus),
        sampling_presets=exp.sampling_presets,
        figures=figures,
    )
