"""Run order: variants that share an engine launch run back to back, so the engine restarts only when the
launch changes.  The baseline's launch goes first (deltas need it, and a failing baseline is news early)."""

from __future__ import annotations

from collections.abc import Sequence

from servetune.tune.variants import Variant


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
