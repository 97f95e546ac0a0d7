"""Hand-built SVG charts for the static reports: lines with labelled points, CDFs, time series with shaded phases,
horizontal delta bars with CI whiskers, and a Pareto scatter with its front and a highlighted winner.

Why not a plotting library: the reports must be one static file that opens offline and prints, with text a
browser test can read. matplotlib would add ~40 MB of dependencies to a tool that otherwise needs none and draws
raster or very verbose SVG; Plotly or Vega inline 3-4 MB of JavaScript in every report. The charts here are five
simple kinds (a few hundred lines), their labels are real `<text>` (searchable, selectable, visible to tests), and
every number goes through `servetune.humanize.number`, the one formatting rule of the tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from servetune.humanize import interval, number

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_FONT = 'font-family="sans-serif" font-size="11"'
_SMALL = 'font-family="sans-serif" font-size="10"'


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1-2-5 steps)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def fmt(value: float) -> str:
    """A tooltip or label number: three significant digits, never scientific notation."""
    return number(value, 3)


def tick(value: float) -> str:
    """A tick value (a round number from `nice_ticks`) as short as it is: 0.5, 20, 1,000 — never 2.00 or 1e+03."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:.9f}".rstrip("0")


@dataclass(frozen=True)
class Series:
    """One line: points in drawing order, optionally a label per point (a concurrency, a rate)."""

    name: str
    points: list[tuple[float, float]]
    labels: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Band:
    """A shaded stretch of the x axis (a warm-up or cool-down phase) with its name."""

    start: float
    end: float
    name: str
    color: str = "#eee"


@dataclass(frozen=True)
class _Frame:
    width: int
    height: int
    left: int = 64
    right: int = 150
    top: int = 24
    bottom: int = 44

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom


def _scale(d0: float, d1: float, r0: float, r1: float) -> Callable[[float], float]:
    span = (d1 - d0) or 1.0
    return lambda v: r0 + (v - d0) / span * (r1 - r0)


def _axes(frame: _Frame, xt: list[float], yt: list[float], x_label: str, y_label: str, title: str) -> list[str]:
    out = [
        f'<rect x="{frame.left}" y="{frame.top}" width="{frame.plot_w}" height="{frame.plot_h}" '
        'fill="#fff" stroke="#999"/>'
    ]
    sx = _scale(xt[0], xt[-1], frame.left, frame.left + frame.plot_w)
    sy = _scale(yt[0], yt[-1], frame.top + frame.plot_h, frame.top)
    for t in xt:
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" y2="{frame.top + frame.plot_h}" stroke="#eee"/>')
        out.append(
            f'<text x="{x:.1f}" y="{frame.top + frame.plot_h + 14}" text-anchor="middle" {_FONT}>{tick(t)}</text>'
        )
    for t in yt:
        y = sy(t)
        out.append(
            f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.left + frame.plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end" {_FONT}>{tick(t)}</text>')
    out.append(
        f'<text x="{frame.left + frame.plot_w / 2:.0f}" y="{frame.height - 8}" text-anchor="middle" '
        f"{_FONT}>{escape(x_label)}</text>"
    )
    out.append(
        f'<text transform="translate(14,{frame.top + frame.plot_h / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle" {_FONT}>{escape(y_label)}</text>'
    )
    out.append(
        f'<text x="{frame.left}" y="15" font-family="sans-serif" font-size="13" '
        f'font-weight="bold">{escape(title)}</text>'
    )
    return out


def _svg(frame: _Frame, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{frame.height}" '
        f'viewBox="0 0 {frame.width} {frame.height}" role="img" aria-label="{escape(label)}">'
        + "".join(body)
        + "</svg>"
    )


LEGEND_CHARS = (22, 36)
"""A legend name's length in the default 150 px of room, and the most a chart widens its legend for (a curve's name
and the tool that measured it: `report.bench`)."""


def _legend_room(names: Sequence[str]) -> tuple[int, int]:
    """(right margin, characters shown) for a legend of these names: 150 px up to 22 characters, wider for longer
    names up to 36 (about 6 px a character); beyond, a name is cut."""
    chars = min(LEGEND_CHARS[1], max([LEGEND_CHARS[0], *map(len, names)]))
    return 150 + round(6.2 * (chars - LEGEND_CHARS[0])), chars


def _legend(frame: _Frame, names: list[str], chars: int = LEGEND_CHARS[0]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        y = frame.top + 10 + i * 16
        x = frame.left + frame.plot_w + 12
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x}" y="{y - 8}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 1}" {_FONT}>{escape(_short(name, chars))}</text>')
    return out


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def line_chart(
    series: list[Series],
    x_label: str,
    y_label: str,
    title: str,
    width: int = 640,
    height: int = 320,
    bands: Sequence[Band] = (),
    lines: bool = True,
    markers: bool = True,
) -> str:
    """Lines (or, with `lines=False`, points alone), one colour per series, joined in the order given (a
    latency–throughput curve may turn back when the throughput drops); each point's label (a concurrency) is
    written beside it; `bands` shade phases of the x axis (warm-up, cool-down) under the lines. Unnamed series
    get no legend (and no room for one)."""
    named = any(s.name for s in series)
    room, chars = _legend_room([s.name for s in series])
    frame = _Frame(width, height, right=room if named else 16)
    xs = [x for s in series for x, _ in s.points] or [0.0, 1.0]
    ys = [y for s in series for _, y in s.points] or [0.0, 1.0]
    xt = nice_ticks(min([0.0, *xs, *(b.start for b in bands)]), max([*xs, *(b.end for b in bands)]))
    yt = nice_ticks(min(0.0, *ys), max(ys))
    body = _axes(frame, xt, yt, x_label, y_label, title)
    sx = _scale(xt[0], xt[-1], frame.left, frame.left + frame.plot_w)
    sy = _scale(yt[0], yt[-1], frame.top + frame.plot_h, frame.top)
    for band in bands:
        x0, x1 = sx(band.start), sx(band.end)
        body.append(
            f'<rect x="{x0:.1f}" y="{frame.top + 1}" width="{max(x1 - x0, 1):.1f}" height="{frame.plot_h - 2}" '
            f'fill="{band.color}"><title>{escape(band.name)}</title></rect>'
        )
        body.append(f'<text x="{x0 + 3:.1f}" y="{frame.top + 12}" {_SMALL} fill="#777">{escape(band.name)}</text>')
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        if lines and len(s.points) > 1:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.points)
            body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        radius = 3.5 if lines or len(s.points) < 200 else 2.0
        if not lines or (markers and len(s.points) <= 60):
            for j, (x, y) in enumerate(s.points):
                tip = f"{s.name}" + (f" {s.labels[j]}" if j < len(s.labels) else "") + f": ({fmt(x)}, {fmt(y)})"
                body.append(
                    f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{radius}" fill="{color}" fill-opacity="0.7">'
                    f"<title>{escape(tip)}</title></circle>"
                )
        for j, label in enumerate(s.labels[: len(s.points)]):
            x, y = s.points[j]
            body.append(
                f'<text class="point-label" x="{sx(x) + 5:.1f}" y="{sy(y) - 6:.1f}" {_SMALL} fill="{color}">'
                f"{escape(label)}</text>"
            )
    if named:
        body += _legend(frame, [s.name for s in series], chars)
    return _svg(frame, body, title)


def scatter_chart(
    series: list[Series],
    x_label: str,
    y_label: str,
    title: str,
    width: int = 640,
    height: int = 320,
    bands: Sequence[Band] = (),
) -> str:
    """Points without lines (one per request: its TTFT at its send time), shaded phases under them."""
    return line_chart(series, x_label, y_label, title, width, height, bands, lines=False)


def cdf_chart(
    series: list[tuple[str, Sequence[float]]], x_label: str, title: str, width: int = 640, height: int = 300
) -> str:
    """Empirical CDFs, one line per run: the share of values at or below x. The x axis ends at the largest p99.5 (the
    tail beyond, up to the maximum named in the title's note, would squeeze the body of the distributions); dashed
    lines mark the median and p99."""
    import numpy as np

    frame = _Frame(width, height)
    cleaned = [(name, np.sort(np.asarray(values, dtype=float))) for name, values in series if len(values)]
    if not cleaned:
        return _svg(frame, [*_axes(frame, [0.0, 1.0], [0.0, 1.0], x_label, "share ≤ x", title)], title)
    hi = max(float(np.quantile(v, 0.995)) for _, v in cleaned)
    top = max(float(v[-1]) for _, v in cleaned)
    lo = min(0.0, *(float(v[0]) for _, v in cleaned))
    xt = nice_ticks(lo, hi)
    yt = [0.0, 0.25, 0.5, 0.75, 1.0]
    note = f" (axis to p99.5; max {fmt(top)})" if top > xt[-1] else ""
    body = _axes(frame, xt, yt, x_label + note, "share of requests ≤ x", title)
    sx = _scale(xt[0], xt[-1], frame.left, frame.left + frame.plot_w)
    sy = _scale(0.0, 1.0, frame.top + frame.plot_h, frame.top)
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        y = sy(q)
        body.append(
            f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.left + frame.plot_w}" y2="{y:.1f}" stroke="#bbb" '
            'stroke-dasharray="4 3"/>'
        )
        body.append(f'<text x="{frame.left + 4}" y="{y - 3:.1f}" {_SMALL} fill="#888">{name}</text>')
    qs = np.linspace(0.0, 1.0, 301)
    for i, (name, values) in enumerate(cleaned):
        color = PALETTE[i % len(PALETTE)]
        xs = np.quantile(values, qs)
        pts = [(min(float(x), xt[-1]), float(q)) for x, q in zip(xs, qs, strict=True)]
        path = " ".join(f"{sx(x):.1f},{sy(q):.1f}" for x, q in pts)
        body.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2">'
            f"<title>{escape(name)}: p50 {fmt(float(np.median(values)))}, p99 {fmt(float(np.quantile(values, 0.99)))}"
            "</title></polyline>"
        )
    body += _legend(frame, [name for name, _ in cleaned])
    return _svg(frame, body, title)


def delta_bars(
    bars: list[tuple[str, float, float, bool]],
    title: str,
    unit: str = "% vs baseline",
    width: int = 640,
    higher_is_better: bool = True,
) -> str:
    """Horizontal bars of deltas with 95% whiskers (an infinite half-width draws no whisker, marked '±?');
    green = better, red = worse, grey = a tie by the ranking's own rule (each bar's `significant`). The value is
    written past the whisker's end, so the whisker never runs through it."""
    row = 22
    frame = _Frame(width, 60 + row * max(len(bars), 1), left=170, right=70, top=24, bottom=36)
    finite = [abs(v) + (h if math.isfinite(h) else 0) for _, v, h, _ in bars] or [1.0]
    bound = max(finite) or 1.0
    ticks = nice_ticks(-bound, bound, 6)
    body: list[str] = [
        f'<rect x="{frame.left}" y="{frame.top}" width="{frame.plot_w}" height="{frame.plot_h}" fill="#fff" '
        'stroke="#999"/>'
    ]
    sx = _scale(ticks[0], ticks[-1], frame.left, frame.left + frame.plot_w)
    for t in ticks:
        x = sx(t)
        body.append(f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" y2="{frame.top + frame.plot_h}" stroke="#eee"/>')
        body.append(
            f'<text x="{x:.1f}" y="{frame.top + frame.plot_h + 14}" text-anchor="middle" {_FONT}>{tick(t)}</text>'
        )
    zero = sx(0.0)
    body.append(
        f'<line x1="{zero:.1f}" y1="{frame.top}" x2="{zero:.1f}" y2="{frame.top + frame.plot_h}" stroke="#333"/>'
    )
    body.append(
        f'<text x="{frame.left + frame.plot_w / 2:.0f}" y="{frame.top + frame.plot_h + 30}" '
        f'text-anchor="middle" {_FONT}>{escape(unit)}</text>'
    )
    body.append(
        f'<text x="{frame.left}" y="15" font-family="sans-serif" font-size="13" font-weight="bold">'
        f"{escape(title)}</text>"
    )
    for i, (label, value, half, significant) in enumerate(bars):
        y = frame.top + 8 + i * row
        x0, x1 = sorted((zero, sx(value)))
        color = ("#2ca02c" if (value > 0) == higher_is_better else "#d62728") if significant else "#aaa"
        shown = interval(value, scale=100.0, signed=True, unit="%")
        shown += ("" if math.isfinite(half) else " ±?") + ("" if significant else " (tie)")
        body.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1):.1f}" height="{row - 8}" fill="{color}">'
            f"<title>{escape(label)}: {interval(value, half, scale=100.0, signed=True, unit='%')}"
            f"{'' if math.isfinite(half) else ' ±?'}</title></rect>"
        )
        right = max(x1, zero)
        if math.isfinite(half):
            lo, hi = sx(value - half), sx(value + half)
            mid = y + (row - 8) / 2
            body.append(f'<line x1="{lo:.1f}" y1="{mid:.1f}" x2="{hi:.1f}" y2="{mid:.1f}" stroke="#000"/>')
            for xe in (lo, hi):
                body.append(f'<line x1="{xe:.1f}" y1="{mid - 4:.1f}" x2="{xe:.1f}" y2="{mid + 4:.1f}" stroke="#000"/>')
            right = max(right, hi)
        body.append(
            f'<text x="{frame.left - 6}" y="{y + 11}" text-anchor="end" {_FONT}>{escape(_short(label, 26))}</text>'
        )
        body.append(f'<text x="{right + 4:.1f}" y="{y + 11}" {_FONT} fill="#333">{shown}</text>')
    return _svg(frame, body, title)


def pareto_front(points: list[tuple[float, float]], x_goal: str = "max", y_goal: str = "min") -> set[int]:
    """Indexes of points no other point beats on both axes."""
    sx = 1 if x_goal == "max" else -1
    sy = 1 if y_goal == "max" else -1
    front = set()
    for i, (x, y) in enumerate(points):
        dominated = any(
            sx * x2 >= sx * x and sy * y2 >= sy * y and (x2, y2) != (x, y)
            for j, (x2, y2) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.add(i)
    return front


def pareto_chart(
    labels: list[str],
    points: list[tuple[float, float]],
    x_label: str,
    y_label: str,
    title: str,
    x_goal: str = "max",
    y_goal: str = "min",
    width: int = 640,
    height: int = 340,
    highlight: int | None = None,
) -> str:
    """Scatter of variants with the Pareto front joined; front points are labelled, and the `highlight`ed one (the
    winner) is ringed and labelled "★ name" wherever it lies."""
    frame = _Frame(width, height, right=150)
    xs = [x for x, _ in points] or [0.0, 1.0]
    ys = [y for _, y in points] or [0.0, 1.0]
    xt, yt = nice_ticks(min(0.0, *xs), max(xs)), nice_ticks(min(0.0, *ys), max(ys))
    body = _axes(frame, xt, yt, x_label, y_label, title)
    sx = _scale(xt[0], xt[-1], frame.left, frame.left + frame.plot_w)
    sy = _scale(yt[0], yt[-1], frame.top + frame.plot_h, frame.top)
    front = pareto_front(points, x_goal, y_goal)
    ordered = sorted(front, key=lambda i: points[i][0])
    if len(ordered) > 1:
        path = " ".join(f"{sx(points[i][0]):.1f},{sy(points[i][1]):.1f}" for i in ordered)
        body.append(f'<polyline points="{path}" fill="none" stroke="#d62728" stroke-dasharray="4 3"/>')
    near = (
        {
            j
            for j, (x, y) in enumerate(points)
            if abs(sx(x) - sx(points[highlight][0])) < 90 and abs(sy(y) - sy(points[highlight][1])) < 14
        }
        if highlight is not None
        else set()
    )  # front labels that would run into the winner's are left to their tooltips
    for i, ((x, y), label) in enumerate(zip(points, labels, strict=True)):
        on = i in front
        body.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{5 if on else 3.5}" '
            f'fill="{"#d62728" if on else "#777"}"><title>{escape(label)}: ({fmt(x)}, {fmt(y)})</title></circle>'
        )
        if i == highlight:
            body.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="9" fill="none" stroke="#2ca02c" stroke-width="2.5"/>'
            )
            body.append(
                f'<text class="winner-label" x="{sx(x) + 11:.1f}" y="{sy(y) + 4:.1f}" font-family="sans-serif" '
                f'font-size="12" font-weight="bold" fill="#1a7f1a">★ {escape(_short(label, 28))}</text>'
            )
        elif on and i not in near:
            body.append(f'<text x="{sx(x) + 7:.1f}" y="{sy(y) - 5:.1f}" {_FONT}>{escape(_short(label, 24))}</text>')
    return _svg(frame, body, title)
