"""sim room: a simulated vLLM.

A `Scheduler` (`SchedulerLimits`, `SimRequest`) and a step-time model (`StepTimeModel`, `StepCoefficients`) make a
`SimEngine`; a `SimDeployment` (`build_deployment`, `deployment_for_config`, `deployment_for`) holds the planner's
capacity for it. It serves over HTTP (`serve`, `SimServer`, flags by `parse_sim_args` -> `SimServeArgs`), in process
behind the load room's protocol (`SimBackend`), or on a virtual clock (`VirtualServer`, `RunTrace`); `explain_ttft`
(`TTFTBreakdown`) says where a predicted TTFT goes. Calibration fits a `CalibrationProfile` to measured runs
(`calibrate_dirs`, `runs_from_dir`, `measured_run`, `MeasuredRun`, `fit_coefficients`, `replay`,
`measured_summary`, `simulated_summary`, `relative_errors`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.sim.backend import SimBackend as SimBackend
    from servetune.sim.calibration import (
        MeasuredRun as MeasuredRun,
    )
    from servetune.sim.calibration import (
        fit_coefficients as fit_coefficients,
    )
    from servetune.sim.calibration import (
        measured_summary as measured_summary,
    )
    from servetune.sim.calibration import (
        relative_errors as relative_errors,
    )
    from servetune.sim.calibration import (
        replay as replay,
    )
    from servetune.sim.calibration import (
        simulated_summary as simulated_summary,
    )
    from servetune.sim.deployment import (
        SimDeployment as SimDeployment,
    )
    from servetune.sim.deployment import (
        build_deployment as build_deployment,
    )
    from servetune.sim.deployment import (
        deployment_for_config as deployment_for_config,
    )
    from servetune.sim.engine import SimEngine as SimEngine
    from servetune.sim.explain import TTFTBreakdown as TTFTBreakdown
    from servetune.sim.explain import explain_ttft as explain_ttft
    from servetune.sim.fitting import (
        calibrate_dirs as calibrate_dirs,
    )
    from servetune.sim.fitting import (
        deployment_for as deployment_for,
    )
    from servetune.sim.fitting import (
        runs_from_dir as runs_from_dir,
    )
    from servetune.sim.flags import (
        SIM_ONLY_FLAGS as SIM_ONLY_FLAGS,
    )
    from servetune.sim.flags import (
        SimServeArgs as SimServeArgs,
    )
    from servetune.sim.flags import (
        parse_sim_args as parse_sim_args,
    )
    from servetune.sim.profile import CalibrationProfile as CalibrationProfile
    from servetune.sim.results import measured_run as measured_run
    from servetune.sim.scheduler import (
        Scheduler as Scheduler,
    )
    from servetune.sim.scheduler import (
        SchedulerLimits as SchedulerLimits,
    )
    from servetune.sim.scheduler import (
        SimRequest as SimRequest,
    )
    from servetune.sim.server import SimServer as SimServer
    from servetune.sim.server import serve as serve
    from servetune.sim.steptime import StepCoefficients as StepCoefficients
    from servetune.sim.steptime import StepTimeModel as StepTimeModel
    from servetune.sim.text import SimTokenizer as SimTokenizer
    from servetune.sim.virtual import RunTrace as RunTrace
    from servetune.sim.virtual import VirtualServer as VirtualServer
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CalibrationProfile": "profile",
            "MeasuredRun": "calibration",
            "RunTrace": "virtual",
            "SIM_ONLY_FLAGS": "flags",
            "Scheduler": "scheduler",
            "SchedulerLimits": "scheduler",
            "SimBackend": "backend",
            "SimDeployment": "deployment",
            "SimEngine": "engine",
            "SimRequest": "scheduler",
            "SimServeArgs": "flags",
            "SimServer": "server",
            "SimTokenizer": "text",
            "StepCoefficients": "steptime",
            "StepTimeModel": "steptime",
            "TTFTBreakdown": "explain",
            "VirtualServer": "virtual",
            "build_deployment": "deployment",
            "calibrate_dirs": "fitting",
            "deployment_for": "fitting",
            "deployment_for_config": "deployment",
            "explain_ttft": "explain",
            "fit_coefficients": "calibration",
            "measured_run": "results",
            "measured_summary": "calibration",
            "parse_sim_args": "flags",
            "relative_errors": "calibration",
            "replay": "calibration",
            "runs_from_dir": "fitting",
            "serve": "server",
            "simulated_summary": "calibration",
        },
    )
