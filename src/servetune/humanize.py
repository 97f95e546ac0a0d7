"""Numbers for people: the one formatting rule of every table, report and terminal line servetune prints."""

from __future__ import annotations

import math


def number(value: float, digits: int = 3) -> str:
    """A number for people: `digits` significant digits, thousands separated, never scientific notation
    (`4.1e+02` → `410`, `23811.4` → `23,811`, `0.00412` → `0.00412`)."""
    if not math.isfinite(value):
        return "∞" if value > 0 else ("−∞" if value < 0 else "—")
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    rounded = round(value, decimals)
    return f"{rounded:,.{decimals}f}"
