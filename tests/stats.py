"""Checks more than one test (and a benchmark) make of measured data: whether gaps are a Poisson process's, and
the schema of a JSON document. Kept here once rather than copied beside each user."""

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
