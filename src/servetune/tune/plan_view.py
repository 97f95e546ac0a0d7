"""`servetune tune --check`: the variants an experiment will run, in run order, with the launches needed."""

from __future__ import annotations

from servetune.tune.experiment import Experiment
from servetune.tune.order import count_launches, order_variants
from servetune.tune.variants import base_config, grid_variants, matrix_variants


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
        ordered = order_variants(variants)
        lines.append(
            f"stage {stage.name}: {len(variants)} variants, {count_launches(ordered)} engine starts "
            f"(declared order: {count_launches(variants)})"
            + ("; its base is the previous stage's winner" if len(lines) > 1 else "")
        )
        for variant in ordered:
            change = ", ".join(f"{k}={v}" for k, v in variant.changes.items()) or "(baseline)"
            lines.append(f"  {variant.name:28s} {variant.config.engine:9s} {change}")
    probes = ", ".join(exp.suite.probes.enabled())
    lines.append(f"suite: {probes} × {exp.suite.repeats} repeats")
    return lines
