"""Means with 95% confidence intervals from repeats, and deltas against a baseline.

Student's t with n-1 degrees of freedom (a small table, so numpy is not even needed); one repeat gives a mean
with no interval, which the ranking treats as "cannot tell apart" from anything it overlaps with.

Two variants whose repeats were measured on the same load draws (the tuner's common random numbers: repeat r of
every variant sends the same arrivals and lengths) are compared repeat by repeat: the interval is that of the
per-repeat ratios, from which the draws' share of the noise — shared by both — has dropped out. Anything
else (other draws, other repeat counts, runs stored without their draws) is compared by Welch's interval of two
independent samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 97.5% quantiles of Student's t for df = 1..30; above that the normal 1.96 is within 2%.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: float) -> float:
    """The t quantile for a 95% two-sided interval (df rounded down, as tables do)."""
    if df < 1:
        return math.inf
    return _T975[int(df) - 1] if df <= 30 else 1.96


@dataclass(frozen=True)
class Estimate:
    """Mean of repeats with its 95% half-width (inf when there is one repeat)."""

    mean: float
    half_width: float
    n: int
    sd: float
    draws: tuple[tuple[str, float], ...] = ()
    """Each repeat's value with the load draws it was measured on (`ProbeResult.draw`); empty when a repeat's
    draws are not known. What `delta` pairs by."""

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def overlaps(self, other: Estimate) -> bool:
        return self.low <= other.high and other.low <= self.high


def estimate(values: Sequence[float | None], draws: Sequence[str | None] | None = None) -> Estimate | None:
    """Mean and 95% CI of the finite values (None when there are none); `draws` (one per value) names the load
    draws each was measured on, kept when every kept value has one."""
    named = list(zip(values, draws if draws is not None else [None] * len(values), strict=True))
    kept = [(float(v), d) for v, d in named if v is not None and math.isfinite(v)]
    if not kept:
        return None
    xs = [v for v, _ in kept]
    paired = tuple((d, v) for v, d in kept if d is not None) if all(d is not None for _, d in kept) else ()
    n = len(xs)
    mean = sum(xs) / n
    if n == 1:
        return Estimate(mean, math.inf, 1, 0.0, paired)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Estimate(mean, t975(n - 1) * sd / math.sqrt(n), n, sd, paired)


@dataclass(frozen=True)
class Delta:
    """Relative change of a variant against a reference, in percent, with a 95% interval, and the smallest change
    that counts (the experiment's `ranking.min_effect_pct`)."""

    pct: float
    half_width_pct: float
    min_effect_pct: float = 0.0
    paired: bool = False
    """The interval is the paired one (both measured on the same draws, compared repeat by repeat)."""

    @property
    def significant(self) -> bool:
        """Outside the noise (the interval excludes 0) *and* at least the practical threshold: the one rule
        behind every delta mark of every report and behind the ranking's ties."""
        return abs(self.pct) > self.half_width_pct and abs(self.pct) >= self.min_effect_pct


def delta(variant: Estimate, reference: Estimate, min_effect_pct: float = 0.0) -> Delta | None:
    """(variant − reference) / reference, in % of the reference mean, with the 95% interval of the change: the
    paired one when both were measured on the same draws (`paired_changes`), else Welch's.

    The reference's own uncertainty in the denominator is ignored (first-order), which is fine while its CI is
    small against its mean; with a single repeat on either side the interval is infinite."""
    if reference.mean == 0:
        return None
    pct = 100 * (variant.mean - reference.mean) / abs(reference.mean)
    changes = paired_changes(variant, reference)
    if changes is not None:
        d = estimate(changes)
        assert d is not None
        return Delta(pct, 100 * d.half_width, min_effect_pct, paired=True)
    if variant.n < 2 or reference.n < 2:
        return Delta(pct, math.inf, min_effect_pct)
    va, vb = variant.sd**2 / variant.n, reference.sd**2 / reference.n
    se = math.sqrt(va + vb)
    if se == 0:
        return Delta(pct, 0.0, min_effect_pct)
    df = (va + vb) ** 2 / ((va**2 / (variant.n - 1)) + (vb**2 / (reference.n - 1)))
    return Delta(pct, 100 * t975(df) * se / abs(reference.mean), min_effect_pct)


def paired_changes(variant: Estimate, reference: Estimate) -> list[float] | None:
    """The relative change repeat by repeat, when the two were measured on the same draws: every repeat of each
    names its draws and the two name the same ones (as many times each). None otherwise: another repeat count,
    other draws, or repeats stored without their draws (a folder from before draws were recorded).

    Each change is the ratio variant / reference − 1 of one draw: a draw that scales both variants alike (a
    Poisson arrival draw moves a fixed rate's goodput ±22%) cancels in it, where a difference would keep the
    draw's scale of the effect. A repeat whose reference measured 0 has no ratio: then every change is the
    difference in units of the reference's mean."""
    if not variant.draws or not reference.draws:
        return None
    mine, theirs = sorted(variant.draws), sorted(reference.draws)
    if [d for d, _ in mine] != [d for d, _ in theirs]:
        return None
    pairs = [(a, b) for (_, a), (_, b) in zip(mine, theirs, strict=True)]
    if all(b != 0 for _, b in pairs):
        return [a / b - 1 for a, b in pairs]
    return [(a - b) / abs(reference.mean) for a, b in pairs]
