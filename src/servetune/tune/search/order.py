"""Run order: variants that share an engine launch run back to back, so the engine restarts only when the
launch changes.  The baseline's launch goes first (deltas need it, and a failing baseline is news early)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from servetune.tune.schema.variants import Variant


def order_variants(variants: Sequence[Variant]) -> list[Variant]:
    """Groups variants by launch key, baseline's group first, groups and members in declaration order."""
    groups: dict[str, list[Variant]] = {}
    for variant in variants:
        groups.setdefault(variant.launch_key(), []).append(variant)
    ordered = sorted(groups.values(), key=lambda group: not any(v.baseline for v in group))
    return [variant for group in ordered for variant in sorted(group, key=lambda v: not v.baseline)]


def count_launches(variants: Sequence[Variant]) -> int:
    """Engine starts needed to run variants in this order (a start whenever the launch key changes)."""
    launches, previous = 0, None
    for variant in variants:
        if variant.launch_key() != previous:
            launches += 1
            previous = variant.launch_key()
    return launches


Standing = tuple[float, ...]
"""A variant's place in the simulator's judgement, lower first (`estimates.Prediction.standing`)."""


def order_by_estimate(variants: Sequence[Variant], standings: Mapping[str, Standing | None]) -> list[Variant]:
    """Launch groups best judged first (`standings` by variant key; a group counts its best member); the
    baseline's group still goes first, unjudged groups last; ties keep the declared order."""
    groups: dict[str, list[Variant]] = {}
    for variant in order_variants(variants):
        groups.setdefault(variant.launch_key(), []).append(variant)

    def best(group: list[Variant]) -> Standing | None:
        known = [s for v in group if (s := standings.get(v.key())) is not None]
        return min(known) if known else None

    def key(group: list[Variant]) -> tuple[bool, bool, Standing]:
        standing = best(group)
        return (not any(v.baseline for v in group), standing is None, standing or ())

    return [variant for group in sorted(groups.values(), key=key) for variant in group]


def prune_by_estimate(
    variants: Sequence[Variant], standings: Mapping[str, Standing | None], keep: int
) -> tuple[list[Variant], list[Variant]]:
    """(to launch, judged by estimate only, best judged first): the baseline, the `keep` best judged other
    variants, and every variant the simulator could not judge are launched; the rest are not."""
    judged = [v for v in variants if not v.baseline and standings.get(v.key()) is not None]
    best = sorted(judged, key=lambda v: standings[v.key()])  # type: ignore[arg-type, return-value]
    dropped = {v.key() for v in best[keep:]}
    return [v for v in variants if v.key() not in dropped], best[keep:]
