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
from servetune.sim.args import CalibrateArgs
from servetune.sim.calibration import MeasuredRun, fit_coefficients
from servetune.sim.deployment import SimDeployment, build_deployment
from servetune.sim.flags import parse_sim_args
from servetune.sim.profile import CalibrationProfile
from servetune.sim.results import measured_run, point_files, read_flags
from servetune.sim.steptime import StepCoefficients

MAX_FIT_ERROR = 1.0
"""The largest miss a saved profile may have on a fitted figure (100%: twice or half the measured TTFT, TPOT or
throughput). The device campaign's fits miss by 48% at worst (benchmarks/device_campaign/FIDELITY.md); a fit that
misses by more does not describe the runs, whatever coefficients it found."""
FRACTIONS = ("bandwidth", "mfu_prefill", "mfu_decode", "link_efficiency")
"""The coefficients that are shares of the hardware's peak: a real engine reaches at most all of it."""


class ImpossibleProfile(ServetuneError):
    """A fit the runs cannot have produced on the stated hardware: the run failed, nothing is written."""

    exit_code = 1


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
    check_profile(
        coef, errors, f"--model {model} --gpu {gpu}" + (f" --vllm-version {vllm_version}" if vllm_version else "")
    )
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


def run_calibrate(args: CalibrateArgs) -> None:
    """`servetune calibrate`: fits, saves the profile, and prints how far the fit misses each figure."""
    profile = calibrate_dirs(
        list(args.results),
        model=args.model,
        gpu=args.gpu,
        vllm_version=args.vllm_version,
        points=list(args.points) or None,
        iters=args.iters,
    )
    profile.save(args.out)
    print(f"calibration profile written to {args.out}")
    for name, errs in profile.fit_errors.items():
        print(f"  {name}: " + ", ".join(f"{k} {v:+.1%}" for k, v in errs.items()))


def check_profile(coef: StepCoefficients, errors: dict[str, dict[str, float]], stated: str) -> None:
    """Refuses a fit that cannot describe the runs: an efficiency outside (0, 1] (faster than the hardware's peak:
    the runs ran on another GPU, model or engine than stated) or a fitted figure missed by more than
    `MAX_FIT_ERROR`."""
    shares = coef.efficiency.model_dump()
    over = {name: shares[name] for name in FRACTIONS if not 0 < shares[name] <= 1}
    if over:
        name, value = next(iter(over.items()))
        raise ImpossibleProfile(
            f"the fit needs {name} {value:.0%} of the hardware's peak (at most 100% is possible): the runs were faster"
            f" than {stated} can be; no profile written",
            "give the --gpu, --model and --vllm-version the runs ran with (see each run's flags.txt)",
        )
    misses = [(run, k, e) for run, errs in errors.items() for k, e in errs.items() if abs(e) > MAX_FIT_ERROR]
    if misses:
        run, key, err = max(misses, key=lambda m: abs(m[2]))
        raise ImpossibleProfile(
            f"the best fit misses {run} {key} by {err:+.0%} ({len(misses)} figures beyond ±{MAX_FIT_ERROR:.0%}): the"
            " simulator with these flags does not describe the runs; no profile written",
            "check --model, --gpu and --vllm-version against the runs, leave out runs of another setup (--points),"
            " or raise --iters",
        )
