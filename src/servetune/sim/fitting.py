"""`servetune calibrate`: measured result directories → a calibration profile.

Each directory is one engine launch (its `flags.txt`) with one `<point>.jsonl` per load point; the
simulated deployment is planned from the same model, GPU, vLLM version and flags, so the fit only has
to explain speed, not capacity. Flags of the launch that the simulator does not model are kept (vLLM ran with
them) and named in the deployment's startup notes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from servetune.errors import ServetuneError
from servetune.sim.calibration import MeasuredRun, fit_coefficients
from servetune.sim.deployment import SimDeployment, build_deployment
from servetune.sim.flags import parse_sim_args
from servetune.sim.profile import CalibrationProfile
from servetune.sim.results import measured_run, point_files, read_flags


def deployment_for(model: str | Path, gpu: str, vllm_version: str | None, flags: list[str]) -> SimDeployment:
    """The simulated deployment of `vllm serve MODEL FLAGS` on `gpu` at `vllm_version`."""
    argv = [str(model), *flags, "--gpu", gpu]
    if vllm_version:
        argv += ["--vllm-version", vllm_version]
    return build_deployment(parse_sim_args(argv, allow_unknown=True))  # flags a real vLLM ran with


def runs_from_dir(
    directory: Path, model: str | Path, gpu: str, vllm_version: str | None, points: list[str] | None = None
) -> list[MeasuredRun]:
    """The measured runs of one result directory, in the order they ran (one launch: they replay on one simulated
    server, so the prefix cache carries over), only the named points scored when `points` is given."""
    if not directory.is_dir():
        raise ServetuneError(f"{directory} is not a result directory", "give directories holding <point>.jsonl files")
    dep = deployment_for(model, gpu, vllm_version, read_flags(directory))
    runs = [
        measured_run(f, dep, name=f"{directory.name}/{f.stem}", launch=str(directory)) for f in point_files(directory)
    ]
    return [r if points is None or r.name.split("/")[-1] in points else replace(r, scored=False) for r in runs]


def calibrate_dirs(
    dirs: list[Path],
    *,
    model: str | Path,
    gpu: str,
    vllm_version: str | None,
    points: list[str] | None = None,
    iters: int = 150,
) -> CalibrationProfile:
    """Fits the step-time coefficients on the runs in `dirs` and returns the profile."""
    runs = [run for d in dirs for run in runs_from_dir(d, model, gpu, vllm_version, points)]
    if not any(r.scored for r in runs):
        raise ServetuneError("no measured runs matched", "check --points against the *.jsonl names")
    coef, errors = fit_coefficients(runs, iters=iters)
    first = runs[0].deployment
    return CalibrationProfile(
        gpu=first.timing.gpu.name,
        device=gpu,
        model=str(model),
        engine_version=first.vllm_version,
        tensor_parallel_size=first.args.tensor_parallel_size,
        coefficients=coef,
        fitted_on=[r.name for r in runs if r.scored],
        fit_errors=errors,
    )
