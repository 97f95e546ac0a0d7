"""A mean with its 95% half-width is written by one rule (`humanize.interval`): the half-width to two significant
figures, the mean to the same decimal place but never finer than its own three significant figures, float dust
written 0 — so seed 001's simulated report never prints "0.440 ± 0.0000000014" or "-0.000000100 ± 0"."""

from __future__ import annotations

import math

import pytest

from servetune.humanize import interval, number


@pytest.mark.parametrize(
    ("mean", "half", "text"),
    [
        (0.44, 1.4e-9, "0.440 ± 0"),  # a half-width below the mean's precision is 0
        (36.0571, 7.6e-8, "36.1 ± 0"),
        (876.0, 1.4e-6, "876 ± 0"),
        (95.82, 7.784, "95.8 ± 7.8"),  # two significant figures, the mean to the same place
        (112.49, 11.88, "112 ± 12"),
        (566.52, 167.42, "570 ± 170"),  # to the tens: the mean is not known to the unit
        (97.77, 0.1573, "97.8 ± 0.2"),  # never finer than the mean's three significant figures
        (20947.6, 33.7, "20,948 ± 34"),
        (0.0012, 0.0005, "0.00120 ± 0.00050"),
        (1.0, 0.0, "1.00 ± 0"),  # identical repeats
        (-0.004, 0.5, "0.00 ± 0.50"),  # rounds to zero: no sign
        (6.8, None, "6.80"),  # one repeat: the mean alone
        (6.8, math.inf, "6.80"),
    ],
)
def test_interval(mean: float, half: float | None, text: str) -> None:
    assert interval(mean, half) == text


def test_float_dust_beside_its_column_is_zero() -> None:
    assert interval(-1.0001e-7, 0.0) == "-0.000000100 ± 0", "alone, a small value is a value"
    assert interval(-1.0001e-7, 0.0, scale=83.9) == "0 ± 0", "beside 83.9 it is dust"
    assert interval(0.00412, 0.0, scale=83.9) == "0.00412 ± 0", "a small real value stays"


def test_a_change_in_percent() -> None:
    assert interval(17.4, 10.96, scale=100, signed=True, unit="%") == "+17% ± 11%"
    assert interval(-1.4e-7, 1.9e-8, scale=100, signed=True, unit="%") == "0% ± 0%"
    assert interval(-8.98, 0.0, scale=100, signed=True, unit="%") == "-8.98% ± 0%"


def test_number_is_unchanged() -> None:
    assert [number(v) for v in (410.2, 23811.4, 0.00412, 0.0, math.inf)] == ["410", "23,811", "0.00412", "0", "∞"]
