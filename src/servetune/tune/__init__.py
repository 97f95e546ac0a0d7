"""tune room: experiments over engine flags, run, stored, ranked and recommended.

An `Experiment` (variants by `Matrix`, `Grid`, `Search` or `Stage`s of `Change`s, an `Objective`) is read by
`parse_experiment` / `load_experiment` (problems as `Issue`s, `check_experiment` past the structure), planned by
`plan_experiment` (`ExperimentPlan`; `order_variants`, `count_launches`, `order_by_estimate`, `prune_by_estimate`
with the estimates' `predictor`) and run by `run_experiment` -> `Outcome`: `LaunchSession`s on an `Executor`
(`LocalExecutor`), `SearchSession` for search, every `RunResult` / `VariantRecord` / `Failure` in the `Store`.
Ranking (`Ranking` of `Entry`s; the function is `servetune.tune.rank.rank`, by its module, whose name it shares)
compares means with confidence intervals (`estimate`, `delta`), and the winner becomes a `Recommendation`
(`servetune.tune.recommend.recommend`, likewise).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.tune.checks import check_experiment as check_experiment
    from servetune.tune.estimates import Prediction as Prediction
    from servetune.tune.estimates import Verdict as Verdict
    from servetune.tune.estimates import predictor as predictor
    from servetune.tune.executor import Executor as Executor
    from servetune.tune.executor import LocalExecutor as LocalExecutor
    from servetune.tune.experiment import (
        Change as Change,
    )
    from servetune.tune.experiment import (
        Experiment as Experiment,
    )
    from servetune.tune.experiment import (
        Grid as Grid,
    )
    from servetune.tune.experiment import (
        Matrix as Matrix,
    )
    from servetune.tune.experiment import (
        Objective as Objective,
    )
    from servetune.tune.experiment import (
        Search as Search,
    )
    from servetune.tune.experiment import (
        Stage as Stage,
    )
    from servetune.tune.issues import Issue as Issue
    from servetune.tune.loader import load_experiment as load_experiment
    from servetune.tune.loader import parse_experiment as parse_experiment
    from servetune.tune.loop import (
        Outcome as Outcome,
    )
    from servetune.tune.loop import (
        default_feasibility as default_feasibility,
    )
    from servetune.tune.loop import (
        fingerprint as fingerprint,
    )
    from servetune.tune.loop import (
        run_experiment as run_experiment,
    )
    from servetune.tune.order import (
        count_launches as count_launches,
    )
    from servetune.tune.order import (
        order_by_estimate as order_by_estimate,
    )
    from servetune.tune.order import (
        order_variants as order_variants,
    )
    from servetune.tune.order import (
        prune_by_estimate as prune_by_estimate,
    )
    from servetune.tune.plan import ExperimentPlan as ExperimentPlan
    from servetune.tune.plan import plan_experiment as plan_experiment
    from servetune.tune.rank import Entry as Entry
    from servetune.tune.rank import FigureKey as FigureKey
    from servetune.tune.rank import Ranking as Ranking
    from servetune.tune.recommend import Recommendation as Recommendation
    from servetune.tune.result import Failure as Failure
    from servetune.tune.result import RunResult as RunResult
    from servetune.tune.result import VariantRecord as VariantRecord
    from servetune.tune.search import SearchSession as SearchSession
    from servetune.tune.session import LaunchSession as LaunchSession
    from servetune.tune.stats import Delta as Delta
    from servetune.tune.stats import Estimate as Estimate
    from servetune.tune.stats import delta as delta
    from servetune.tune.stats import estimate as estimate
    from servetune.tune.store import STORE_NAME as STORE_NAME
    from servetune.tune.store import Store as Store
    from servetune.tune.variants import (
        Variant as Variant,
    )
    from servetune.tune.variants import (
        apply_change as apply_change,
    )
    from servetune.tune.variants import (
        base_config as base_config,
    )
    from servetune.tune.variants import (
        grid_variants as grid_variants,
    )
    from servetune.tune.variants import (
        matrix_variants as matrix_variants,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Change": "experiment",
            "Delta": "stats",
            "Entry": "rank",
            "Estimate": "stats",
            "Executor": "executor",
            "Experiment": "experiment",
            "ExperimentPlan": "plan",
            "Failure": "result",
            "FigureKey": "rank",
            "Grid": "experiment",
            "Issue": "issues",
            "LaunchSession": "session",
            "LocalExecutor": "executor",
            "Matrix": "experiment",
            "Objective": "experiment",
            "Outcome": "loop",
            "Prediction": "estimates",
            "Ranking": "rank",
            "Recommendation": "recommend",
            "RunResult": "result",
            "STORE_NAME": "store",
            "Search": "experiment",
            "SearchSession": "search",
            "Stage": "experiment",
            "Store": "store",
            "Variant": "variants",
            "VariantRecord": "result",
            "Verdict": "estimates",
            "apply_change": "variants",
            "base_config": "variants",
            "check_experiment": "checks",
            "count_launches": "order",
            "default_feasibility": "loop",
            "delta": "stats",
            "estimate": "stats",
            "fingerprint": "loop",
            "grid_variants": "variants",
            "load_experiment": "loader",
            "matrix_variants": "variants",
            "order_by_estimate": "order",
            "order_variants": "order",
            "parse_experiment": "loader",
            "plan_experiment": "plan",
            "predictor": "estimates",
            "prune_by_estimate": "order",
            "run_experiment": "loop",
        },
    )
