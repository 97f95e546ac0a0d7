"""Checks more than one test (and a benchmark) make of measured data: whether gaps are a Poisson process's, and
the schema of a JSON document. Kept here once rather than copied beside each user.

Two Poisson checks, for two kinds of data. `ks_exponential` judges the gaps themselves: exact for a schedule, but
on times a real event loop stamped it also sees the loop's sub-millisecond wake-ups (two arrivals due while the
loop was busy leave back to back, a gap of microseconds), and at 1,000 gaps that alone moved its p-value from 0.55
to 0.05 on a quiet 2-CPU machine, and below 0.01 once in CI. `poisson_counts` judges what a Poisson process is
by definition (counts in disjoint windows, variance equal to the mean), which jitter far below the window cannot
move, while a paced or bunched stream still fails it by orders of magnitude."""

from __future__ import annotations

import math

import numpy as np


def ks_exponential(gaps: np.ndarray, rate: float) -> float:
    """The Kolmogorov–Smirnov p-value of `gaps` against Exp(rate) (asymptotic distribution, Stephens' correction;
    scipy is not a dependency, and these eight lines are all of it that is needed)."""
    x = np.sort(gaps)
    n = len(x)
    cdf = 1 - np.exp(-rate * x)
    d = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return float(min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101)))))


def poisson_counts(times: np.ndarray, window_s: float) -> float:
    """The two-sided p-value that `times` are a Poisson process: counts in consecutive `window_s` windows, their
    dispersion (Σ(n − n̄)² / n̄, χ² with k − 1 degrees of freedom for Poisson counts; too regular fails as surely
    as too bunched). The rate is the caller's to check (a ratio of counts to time says more than this test can).
    χ² tail by Wilson–Hilferty (scipy is not a dependency), good from about 30 windows."""
    t = np.sort(times) - np.min(times)
    k = int(t[-1] / window_s)
    counts = np.bincount((t // window_s).astype(int), minlength=k)[:k]
    mean = float(np.mean(counts))
    x = float(np.sum((counts - mean) ** 2) / mean)
    z = ((x / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return math.erfc(abs(z) / math.sqrt(2))


def json_schema(value: object) -> object:
    """The keys of a JSON document, recursively (a list by the union of its items' keys): its schema, without the
    values (which variant comes first, or which flags it changes, is not the schema). An empty list and a list of
    plain values have the same schema: a run that printed a warning and one that printed none agree."""
    if isinstance(value, dict):
        return {k: json_schema(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_merge([json_schema(item) for item in value])]
    return None


def _merge(shapes: list[object]) -> object:
    lists = [s for s in shapes if isinstance(s, list)]
    if lists:
        return [_merge([item for s in lists for item in s])]
    dicts = [s for s in shapes if isinstance(s, dict)]
    if not dicts:
        return None
    keys = sorted({k for d in dicts for k in d})
    return {k: _merge([d[k] for d in dicts if k in d]) for k in keys}
