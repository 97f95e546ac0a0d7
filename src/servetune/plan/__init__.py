"""plan room: vLLM's memory ledger, feasibility, fixes and roofline speed for a model on a GPU.

Entry points: `plan_for(...) -> Plan`, `resolve_target(...) -> Target` (what a command asks for), `place(...) ->
Placement` (how many GPUs it runs on), `compare_with_log` (against a real startup log); tables are
`servetune.plan.render.render` (by its module, whose name it shares).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.plan.api import MTP_METHODS as MTP_METHODS, Plan as Plan, plan_for as plan_for
    from servetune.plan.calibrate import (
        LogComparison as LogComparison,
        OverheadCheck as OverheadCheck,
        check_overhead as check_overhead,
        compare_with_log as compare_with_log,
        fit_overhead as fit_overhead,
        ledger_flags as ledger_flags,
    )
    from servetune.plan.demo import run_demo as run_demo
    from servetune.plan.fixes import Fix as Fix, find_fixes as find_fixes
    from servetune.plan.inputs import PlanInputs as PlanInputs, inputs_from_flags as inputs_from_flags
    from servetune.plan.memory import (
        FAMILIES as FAMILIES,
        OverheadModel as OverheadModel,
        capture_sizes as capture_sizes,
        family_of as family_of,
    )
    from servetune.plan.placement import Placement as Placement, place as place
    from servetune.plan.render import render_check as render_check
    from servetune.plan.roofline import (
        Efficiency as Efficiency,
        ModelCosts as ModelCosts,
        StepTime as StepTime,
        accepted_tokens as accepted_tokens,
        decode_step_time as decode_step_time,
        model_costs as model_costs,
        prefill_time as prefill_time,
        step_time as step_time,
    )
    from servetune.plan.seeds import SEEDS as SEEDS, SeedSystem as SeedSystem
    from servetune.plan.speeds import SpeedEstimate as SpeedEstimate
    from servetune.plan.target import Target as Target, resolve_target as resolve_target
    from servetune.plan.versions import parse_version as parse_version
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Efficiency": "roofline",
            "FAMILIES": "memory",
            "Fix": "fixes",
            "LogComparison": "calibrate",
            "MTP_METHODS": "api",
            "ModelCosts": "roofline",
            "OverheadCheck": "calibrate",
            "OverheadModel": "memory",
            "Placement": "placement",
            "Plan": "api",
            "PlanInputs": "inputs",
            "SEEDS": "seeds",
            "SeedSystem": "seeds",
            "SpeedEstimate": "speeds",
            "StepTime": "roofline",
            "Target": "target",
            "accepted_tokens": "roofline",
            "capture_sizes": "memory",
            "check_overhead": "calibrate",
            "compare_with_log": "calibrate",
            "decode_step_time": "roofline",
            "family_of": "memory",
            "find_fixes": "fixes",
            "fit_overhead": "calibrate",
            "inputs_from_flags": "inputs",
            "ledger_flags": "calibrate",
            "model_costs": "roofline",
            "parse_version": "versions",
            "place": "placement",
            "plan_for": "api",
            "prefill_time": "roofline",
            "render_check": "render",
            "resolve_target": "target",
            "run_demo": "demo",
            "step_time": "roofline",
        },
    )
