"""`servetune tune --check`: the variants an experiment will run, in run order, with the launches needed."""

from __future__ import annotations

from servetune.tune.experiment import Experiment
from servetune.tune.order import count_launches, order_variants
from servetune.tune.variants import Variant, base_config, grid_variants, matrix_variants


def variant_plan(exp: Experiment) -> list[str]:
    """Readable lines: each stage's variants in run order and the engine starts they need."""
    lines = [f"experiment {exp.name}: valid"]
    base, client = base_config(exp), exp.client
    for stage in exp.variants.as_stages():
        if stage.search is not None:
            lines.append(
                f"stage {stage.name}: search over {', '.join(stage.search.space)} "
                f"(≤ {stage.search.max_trials} trials, ≤ {stage.search.budget_gpu_minutes:g} GPU-minutes)"
            )
            continue
        if stage.matrix is not None:
            variants = matrix_variants(base, client, stage.matrix, stage.name)
        else:
            assert stage.grid is not None
            variants = grid_variants(base, client, stage.grid, stage.name)
        ordered, pruned, notes = order_variants(variants), [], {}
        if exp.estimate.mode != "off":
            ordered, pruned, notes = _estimated(exp, ordered)
        lines.append(
            f"stage {stage.name}: {len(variants)} variants, {count_launches(ordered)} engine starts "
            f"(declared order: {count_launches(variants)})"
            + (f", {len(pruned)} judged by estimate only" if pruned else "")
            + ("; its base is the previous stage's winner" if len(lines) > 1 else "")
        )
        for variant in [*ordered, *pruned]:
            change = ", ".join(f"{k}={v}" for k, v in variant.changes.items()) or "(baseline)"
            mark = "estimate only: " if variant in pruned else ""
            note = f"  [{mark}{notes[variant.key()]}]" if variant.key() in notes else ""
            lines.append(f"  {variant.name:28s} {variant.config.engine:9s} {change}{note}")
    probes = ", ".join(exp.suite.probes.enabled())
    lines.append(f"suite: {probes} × {exp.suite.repeats} repeats")
    return lines


def _estimated(exp: Experiment, variants: list[Variant]) -> tuple[list[Variant], list[Variant], dict[str, str]]:
    """The run order and pruning the simulator's estimates give (what `servetune tune` will do)."""
    from servetune.tune.estimates import judge, predictor

    predict = predictor(exp)
    verdict = judge(exp, variants, {v.key(): predict(v.config) for v in variants})
    return verdict.launch, verdict.pruned, verdict.notes
