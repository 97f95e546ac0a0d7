"""sim room: a simulated vLLM (scheduler, step time, KV cache), calibrated against measured runs.

Entry points: `SimBackend(deployment)` in process, `VirtualServer` on a virtual clock, `serve` over HTTP
(`parse_sim_args`), `deployment_for_config(cfg, ...)` / `build_deployment`, and calibration (`calibrate_dirs`,
`fit_coefficients` -> `CalibrationProfile`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.sim.backend import SimBackend as SimBackend
    from servetune.sim.calibration import (
        TARGETS as TARGETS,
        MeasuredRun as MeasuredRun,
        fit_coefficients as fit_coefficients,
        measured_summary as measured_summary,
        relative_errors as relative_errors,
        replay as replay,
        replay_launch as replay_launch,
        simulated_summary as simulated_summary,
        targets as targets,
    )
    from servetune.sim.deployment import (
        SimDeployment as SimDeployment,
        build_deployment as build_deployment,
        deployment_for_config as deployment_for_config,
    )
    from servetune.sim.engine import SimEngine as SimEngine
    from servetune.sim.explain import PARTS as PARTS, TTFTBreakdown as TTFTBreakdown, explain_ttft as explain_ttft
    from servetune.sim.fitting import (
        calibrate_dirs as calibrate_dirs,
        deployment_for as deployment_for,
        runs_from_dir as runs_from_dir,
    )
    from servetune.sim.flags import (
        SIM_ONLY_FLAGS as SIM_ONLY_FLAGS,
        SimServeArgs as SimServeArgs,
        parse_sim_args as parse_sim_args,
        sim_args as sim_args,
        sim_target as sim_target,
    )
    from servetune.sim.kvcache import BlockPool as BlockPool, block_hashes as block_hashes
    from servetune.sim.profile import CalibrationProfile as CalibrationProfile
    from servetune.sim.results import measured_run as measured_run, read_flags as read_flags, to_record as to_record
    from servetune.sim.scheduler import (
        Scheduler as Scheduler,
        SchedulerLimits as SchedulerLimits,
        SimRequest as SimRequest,
    )
    from servetune.sim.server import SimServer as SimServer, serve as serve
    from servetune.sim.steptime import StepCoefficients as StepCoefficients, StepTimeModel as StepTimeModel
    from servetune.sim.text import SimTokenizer as SimTokenizer
    from servetune.sim.virtual import RunTrace as RunTrace, VirtualServer as VirtualServer
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "BlockPool": "kvcache",
            "CalibrationProfile": "profile",
            "MeasuredRun": "calibration",
            "PARTS": "explain",
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
            "TARGETS": "calibration",
            "TTFTBreakdown": "explain",
            "VirtualServer": "virtual",
            "block_hashes": "kvcache",
            "build_deployment": "deployment",
            "calibrate_dirs": "fitting",
            "deployment_for": "fitting",
            "deployment_for_config": "deployment",
            "explain_ttft": "explain",
            "fit_coefficients": "calibration",
            "measured_run": "results",
            "measured_summary": "calibration",
            "parse_sim_args": "flags",
            "read_flags": "results",
            "relative_errors": "calibration",
            "replay": "calibration",
            "replay_launch": "calibration",
            "runs_from_dir": "fitting",
            "serve": "server",
            "sim_args": "flags",
            "sim_target": "flags",
            "simulated_summary": "calibration",
            "targets": "calibration",
            "to_record": "results",
        },
    )
