"""tune room: experiments over engine flags, planned, run, stored, ranked and recommended.

Entry points: `load_experiment(path) -> Experiment`, `plan_experiment` (what `--check` prints is what runs),
`run_experiment(exp, out_dir) -> Outcome` over `LaunchSession`s on an `Executor` (`virtual_launcher(exp)`: the
simulator in process), the `Store`; ranking and the recommendation are `servetune.tune.rank.rank` and
`servetune.tune.recommend.recommend` (by their modules, whose names they share).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.tune.checks import check_experiment as check_experiment
    from servetune.tune.estimates import (
        ESTIMATE_PROBE as ESTIMATE_PROBE,
        Prediction as Prediction,
        Verdict as Verdict,
        predictor as predictor,
    )
    from servetune.tune.executor import Executor as Executor, LocalExecutor as LocalExecutor
    from servetune.tune.experiment import (
        Change as Change,
        Experiment as Experiment,
        Grid as Grid,
        Matrix as Matrix,
        Objective as Objective,
        RankingSpec as RankingSpec,
        Search as Search,
        Stage as Stage,
    )
    from servetune.tune.issues import Issue as Issue
    from servetune.tune.loader import load_experiment as load_experiment, parse_experiment as parse_experiment
    from servetune.tune.loop import (
        Outcome as Outcome,
        default_feasibility as default_feasibility,
        fingerprint as fingerprint,
        run_experiment as run_experiment,
    )
    from servetune.tune.order import (
        count_launches as count_launches,
        order_by_estimate as order_by_estimate,
        order_variants as order_variants,
        prune_by_estimate as prune_by_estimate,
    )
    from servetune.tune.plan import ExperimentPlan as ExperimentPlan, plan_experiment as plan_experiment
    from servetune.tune.progress import Emit as Emit, stopwatch as stopwatch
    from servetune.tune.rank import Entry as Entry, FigureKey as FigureKey, Ranking as Ranking
    from servetune.tune.recommend import Recommendation as Recommendation
    from servetune.tune.result import Failure as Failure, RunResult as RunResult, VariantRecord as VariantRecord
    from servetune.tune.search import SearchSession as SearchSession
    from servetune.tune.session import LaunchSession as LaunchSession, default_launcher as default_launcher
    from servetune.tune.sources import source_for as source_for
    from servetune.tune.stats import Delta as Delta, Estimate as Estimate, delta as delta, estimate as estimate
    from servetune.tune.store import STORE_NAME as STORE_NAME, Store as Store
    from servetune.tune.variants import (
        Variant as Variant,
        apply_change as apply_change,
        base_config as base_config,
        grid_variants as grid_variants,
        matrix_variants as matrix_variants,
    )
    from servetune.tune.virtual import calibration_source as calibration_source, virtual_launcher as virtual_launcher
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Change": "experiment",
            "Delta": "stats",
            "ESTIMATE_PROBE": "estimates",
            "Emit": "progress",
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
            "RankingSpec": "experiment",
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
            "calibration_source": "virtual",
            "check_experiment": "checks",
            "count_launches": "order",
            "default_feasibility": "loop",
            "default_launcher": "session",
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
            "source_for": "sources",
            "stopwatch": "progress",
            "virtual_launcher": "virtual",
        },
    )
