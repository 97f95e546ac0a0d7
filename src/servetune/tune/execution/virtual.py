"""The simulator in process as a launch target: `virtual_launcher(exp)` starts an `engine: sim` variant as a
`VirtualEngine` — `sim.backend.SimBackend` on its virtual clock, with no process, no port and no wall-clock
waiting — so a matrix that `sim-serve` needs minutes for (its time runs only `--time-scale` times faster than
the wall clock, with HTTP in between) runs in seconds, through the same session, probes, repeats, store and
ranking as a launched engine. Its figures are the simulator's (a roofline step-time model, calibrated only where
the experiment gives `estimate.calibration`); the demo runs seed 001's round 2 this way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from servetune.control.liveness import ProbeOutcome
from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import FailureInfo
from servetune.engines.sim import SimAdapter
from servetune.errors import ServetuneError
from servetune.load.backend import ClientSpec
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import SimDeployment, deployment_for_config
from servetune.tune.schema.experiment import Experiment
from servetune.tune.search.estimates import load_calibration


@dataclass
class VirtualEngine:
    """A simulated deployment standing where a launched engine would: it never dies, and each backend it gives
    starts from a fresh simulated server (a variant's probes and repeats share one, as they share a launch)."""

    deployment: SimDeployment
    facts: EngineFacts

    def backend(self, client: ClientSpec) -> SimBackend:
        return SimBackend(self.deployment, client=client)

    def alive(self) -> bool:
        return True

    def responds(self, deadline_s: float) -> ProbeOutcome:
        """The simulator cannot freeze: its requests fail only as the experiment asks (timeouts it simulates)."""
        return ProbeOutcome(ok=True, seconds=0.0, detail="simulated")

    def classify_death(self) -> FailureInfo | None:
        return None

    def __enter__(self) -> VirtualEngine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


def calibration_source(exp: Experiment) -> str | None:
    """The calibration profile the simulated variants run with: `estimate.calibration`, else the sim config's own
    `calibration` flag; None = uncalibrated (the roofline's default coefficients)."""
    flag = exp.engine.flags.get("calibration")
    return exp.estimate.calibration or (str(flag) if flag else None)


def virtual_launcher(exp: Experiment) -> Callable[[EngineConfig, Path, float], VirtualEngine]:
    """A launcher (`tune.session.Launcher`) for the experiment's `engine: sim` variants, on the experiment's GPU
    and calibration profile; the startup facts are read from the simulator's vLLM-shaped startup lines by the
    adapter that reads `sim-serve`'s log, so they are the facts a launch would have recorded."""
    calibration = load_calibration(exp.estimate.calibration)
    gpu = exp.hardware.gpu_arg()

    def launch(config: EngineConfig, log_dir: Path, startup_timeout_s: float) -> VirtualEngine:
        if config.engine != "sim":
            raise ServetuneError(
                f"the simulator in process runs `engine: sim` variants only, not {config.engine}",
                "launch this experiment with `servetune tune` (it starts real engines)",
            )
        deployment = deployment_for_config(config, gpu=gpu, calibration=calibration)
        return VirtualEngine(deployment, SimAdapter().parse_log("\n".join(deployment.startup_lines())))

    return launch
