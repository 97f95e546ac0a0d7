"""Numbers for people: the one formatting rule of every table, report and terminal line servetune prints."""

from __future__ import annotations

import math

DUST = 1e-6
"""A mean or half-width smaller than this fraction of the values it is read beside is float dust (two equal times
subtracted, a simulator's nanosecond rounding): it is written 0, not -0.000000100."""


def number(value: float, digits: int = 3) -> str:
    """A number for people: `digits` significant digits, thousands separated, never scientific notation
    (`4.1e+02` → `410`, `23811.4` → `23,811`, `0.00412` → `0.00412`)."""
    if not math.isfinite(value):
        return "∞" if value > 0 else ("−∞" if value < 0 else "—")
    if value == 0:
        return "0"
    decimals = max(0, _place(value, digits))
    rounded = round(value, decimals)
    return f"{rounded:,.{decimals}f}"


def interval(
    mean: float, half_width: float | None = None, *, scale: float | None = None, signed: bool = False, unit: str = ""
) -> str:
    """A mean and its 95% half-width for people, by one rule (`95.8 ± 7.8`, `570 ± 170`, `0.440 ± 0`): the
    half-width to two significant figures and the mean to the same decimal place, but never finer than the mean's
    own three significant figures (`number`) — a half-width below the precision the mean is shown to is `± 0`,
    never `± 0.0000000014`. Without a finite half-width (one repeat) the mean alone, as `number` writes it.

    `scale` is the size of the values the mean is read beside (the largest of its column; 100 for a change in
    percent): a mean or half-width below `DUST` of it is written 0. `signed` writes a + on a positive mean (a
    change: `+17% ± 11%`); a mean that rounds to zero carries no sign. `unit` follows both numbers."""
    if not math.isfinite(mean):
        return number(mean) + unit
    if scale is not None and abs(mean) < DUST * abs(scale):
        mean = 0.0
    if half_width is None or not math.isfinite(half_width):
        return _fixed(mean, max(0, _place(mean, 3)) if mean else 0, signed) + unit
    half = abs(half_width)
    if scale is not None and half < DUST * abs(scale):
        half = 0.0
    place = _place(half, 2) if half else 0
    if mean:
        shown = max(0, _place(mean, 3))
        place = min(place, shown) if half else shown
    width = round(half, place)
    return f"{_fixed(mean, place, signed)}{unit} ± {_fixed(width, place, False) if width else '0'}{unit}"


def _place(value: float, digits: int) -> int:
    """The decimal place (1 = tenths, -1 = tens) of a value's last significant digit of `digits`."""
    return digits - 1 - math.floor(math.log10(abs(value)))


def _fixed(value: float, place: int, signed: bool) -> str:
    """A value rounded at `place` (tens and hundreds too: 567 at -1 is 570), thousands separated; a value that
    rounds to zero is 0 without a sign."""
    rounded = round(value, place) + 0.0
    if rounded == 0:
        return f"{0:.{max(0, place)}f}"
    return f"{rounded:{'+' if signed else ''},.{max(0, place)}f}"
