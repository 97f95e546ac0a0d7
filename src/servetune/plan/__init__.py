"""plan room: vLLM's memory ledger, feasibility, roofline speed and flags, for a model on a GPU.

`plan_for` -> `Plan` is the entry point; `resolve_target` -> `Target` reads what a command asks for and `place` ->
`Placement` how many GPUs it runs on. The parts: `inputs` (vLLM flags -> `PlanInputs`), `versions` (what changes
between vLLM 0.11 and 0.33; `parse_version`), `defaults` (GPU-dependent batch limits), `rules` (hardware and
parallelism rules), `memory` (weights per GPU, modelled overhead: `OverheadModel`), `kvcache` (pages, blocks,
groups, capacity lines, exact), `fixes` (`Fix`, `find_fixes`), `roofline` (`Efficiency`, `model_costs`,
`step_time`, `decode_step_time`, `prefill_time`) and `speeds` (`SpeedEstimate`), `command` (`vllm serve` /
`docker run`), `calibrate` (against a real startup log: `compare_with_log`, `check_overhead`, `fit_overhead`),
`render` (tables: `servetune.plan.render.render`, by its module, whose name it shares), `seeds`/`demo` (the
field-report systems: `SEEDS`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.plan.api import Plan as Plan
    from servetune.plan.api import plan_for as plan_for
    from servetune.plan.calibrate import (
        LogComparison as LogComparison,
    )
    from servetune.plan.calibrate import (
        OverheadCheck as OverheadCheck,
    )
    from servetune.plan.calibrate import (
        check_overhead as check_overhead,
    )
    from servetune.plan.calibrate import (
        compare_with_log as compare_with_log,
    )
    from servetune.plan.calibrate import (
        fit_overhead as fit_overhead,
    )
    from servetune.plan.fixes import Fix as Fix
    from servetune.plan.fixes import find_fixes as find_fixes
    from servetune.plan.inputs import PlanInputs as PlanInputs
    from servetune.plan.inputs import inputs_from_flags as inputs_from_flags
    from servetune.plan.memory import OverheadModel as OverheadModel
    from servetune.plan.placement import Placement as Placement
    from servetune.plan.placement import place as place
    from servetune.plan.roofline import (
        Efficiency as Efficiency,
    )
    from servetune.plan.roofline import (
        ModelCosts as ModelCosts,
    )
    from servetune.plan.roofline import (
        StepTime as StepTime,
    )
    from servetune.plan.roofline import (
        decode_step_time as decode_step_time,
    )
    from servetune.plan.roofline import (
        model_costs as model_costs,
    )
    from servetune.plan.roofline import (
        prefill_time as prefill_time,
    )
    from servetune.plan.roofline import (
        step_time as step_time,
    )
    from servetune.plan.seeds import SEEDS as SEEDS
    from servetune.plan.seeds import SeedSystem as SeedSystem
    from servetune.plan.speeds import SpeedEstimate as SpeedEstimate
    from servetune.plan.target import Target as Target
    from servetune.plan.target import resolve_target as resolve_target
    from servetune.plan.versions import parse_version as parse_version
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Efficiency": "roofline",
            "Fix": "fixes",
            "LogComparison": "calibrate",
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
            "check_overhead": "calibrate",
            "compare_with_log": "calibrate",
            "decode_step_time": "roofline",
            "find_fixes": "fixes",
            "fit_overhead": "calibrate",
            "inputs_from_flags": "inputs",
            "model_costs": "roofline",
            "parse_version": "versions",
            "place": "placement",
            "plan_for": "api",
            "prefill_time": "roofline",
            "resolve_target": "target",
            "step_time": "roofline",
        },
    )
