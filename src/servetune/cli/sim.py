"""CLI of the simulator room: `sim-serve`, `estimate`, `calibrate`; their options are `sim/args.py`'s models.

`sim-serve` and `estimate` take MODEL and vLLM's own flags after their options (`sim/flags.py`: a flag it does not
know is an error with a suggestion, unless `--pass-unknown-flags`), so a variant written for `vllm serve` runs
unchanged against the simulator; `estimate` takes `servetune bench`'s load options (`load/options.py`) and prints
bench's summary.
"""

from __future__ import annotations

import typer

from servetune.cli.model_options import PASSTHROUGH, ModelCommand, field_lines, model_options
from servetune.sim.args import SIM_FLAG_FIELDS, CalibrateArgs, EstimateArgs, SimServeCommand
from servetune.sim.flags import SimServeArgs

ENGINE_WORDS = "MODEL [OPTIONS] [vLLM FLAGS]"
SIM_FLAGS = "\n\n".join(
    [
        "MODEL: a directory with config.json, or a bundled name (or --model MODEL among vLLM's flags). vLLM's "
        "flags by vLLM's names (-tp 2, --max-model-len 128K, --max-num-seqs 64, ...), and the simulator's own:",
        "\b\n" + "\n".join(field_lines(SimServeArgs, SIM_FLAG_FIELDS)),  # \b: click keeps the lines as they are
    ]
)


def sim_serve(args: SimServeCommand) -> None:
    """Serve a simulated vLLM: OpenAI API, /metrics, vLLM's flags and startup lines (no GPU needed)."""
    if args.show_config:
        from servetune.sim.estimate import show_config

        show_config(list(args.engine_flags), args.pass_unknown_flags)
        return
    from servetune.sim.server import run_sim_serve

    run_sim_serve(args)


def estimate(args: EstimateArgs) -> None:
    """Predict a workload's latency and throughput on a vLLM config, offline, in seconds: the summary `servetune
    bench` prints, in simulated time (bench's load options, vLLM bench serve's names included; give
    --concurrency N or --rate R). --seed is the workload's, as in bench."""
    from servetune.sim.estimate import run_estimate

    run_estimate(args)


def calibrate(args: CalibrateArgs) -> None:
    """Fit the simulator's step-time coefficients to measured runs and save a calibration profile."""
    from servetune.sim.fitting import run_calibrate

    run_calibrate(args)


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app."""
    engine = {"cls": ModelCommand, "context_settings": PASSTHROUGH, "options_metavar": ENGINE_WORDS}
    app.command("sim-serve", **engine, epilog=SIM_FLAGS)(model_options(SimServeCommand)(sim_serve))  # type: ignore[arg-type]
    app.command("estimate", **engine, epilog=SIM_FLAGS)(model_options(EstimateArgs)(estimate))  # type: ignore[arg-type]
    app.command("calibrate")(model_options(CalibrateArgs)(calibrate))
