"""Hand-built SVG charts (line, horizontal bars with CI whiskers, scatter with a Pareto front), so the HTML
report is one static file with no script, no network and no plotting dependency."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_FONT = 'font-family="sans-serif" font-size="11"'


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
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[float, float]]


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
            f'<text x="{x:.1f}" y="{frame.top + frame.plot_h + 14}" text-anchor="middle" {_FONT}>{fmt(t)}</text>'
        )
    for t in yt:
        y = sy(t)
        out.append(
            f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.left + frame.plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end" {_FONT}>{fmt(t)}</text>')
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


def _scale(d0: float, d1: float, r0: float, r1: float):
    span = (d1 - d0) or 1.0
    return lambda v: r0 + (v - d0) / span * (r1 - r0)


def _svg(frame: _Frame, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{frame.height}" '
        f'viewBox="0 0 {frame.width} {frame.height}" role="img">' + "".join(body) + "</svg>"
    )


def _legend(frame: _Frame, names: list[str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        y = frame.top + 10 + i * 16
        x = frame.left + frame.plot_w + 12
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x}" y="{y - 8}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 1}" {_FONT}>{escape(name[:22])}</text>')
    return out


def line_chart(
    series: list[Series], x_label: str, y_label: str, title: str, width: int = 640, height: int = 320
) -> str:
    """Lines with markers, one colour per series (e.g. latency against throughput per variant); points are
    joined in the order given."""
    frame = _Frame(width, height)
    xs = [x for s in series for x, _ in s.points] or [0.0, 1.0]
    ys = [y for s in series for _, y in s.points] or [0.0, 1.0]
    xt, yt = nice_ticks(min(0.0, min(xs)), max(xs)), nice_ticks(min(0.0, min(ys)), max(ys))
    body = _axes(frame, xt, yt, x_label, y_label, title)
    sx = _scale(xt[0], xt[-1], frame.left, frame.left + frame.plot_w)
    sy = _scale(yt[0], yt[-1], frame.top + frame.plot_h, frame.top)
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = s.points  # in load order (rising concurrency): a curve may turn back when throughput drops
        if len(pts) > 1:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in pts:
            body.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(s.name)}: ({fmt(x)}, {fmt(y)})</title></circle>"
            )
    body += _legend(frame, [s.name for s in series])
    return _svg(frame, body)


def delta_bars(
    bars: list[tuple[str, float, float]],
    title: str,
    unit: str = "% vs baseline",
    width: int = 640,
    higher_is_better: bool = True,
) -> str:
    """Horizontal bars of deltas with 95% whiskers (an infinite half-width draws no whisker, marked '±?');
    green = better, red = worse, grey = inside the noise."""
    row = 22
    frame = _Frame(width, 60 + row * max(len(bars), 1), left=170, right=30, top=24, bottom=36)
    finite = [abs(v) + (h if math.isfinite(h) else 0) for _, v, h in bars] or [1.0]
    bound = max(finite) or 1.0
    ticks = nice_ticks(-bound, bound, 6)
    body = _axes(frame, ticks, [0.0, 1.0], unit, "", title)[:1]
    sx = _scale(ticks[0], ticks[-1], frame.left, frame.left + frame.plot_w)
    for t in ticks:
        x = sx(t)
        body.append(f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" y2="{frame.top + frame.plot_h}" stroke="#eee"/>')
        body.append(
            f'<text x="{x:.1f}" y="{frame.top + frame.plot_h + 14}" text-anchor="middle" {_FONT}>{fmt(t)}</text>'
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
    for i, (label, value, half) in enumerate(bars):
        y = frame.top + 8 + i * row
        x0, x1 = sorted((zero, sx(value)))
        significant = math.isfinite(half) and abs(value) > half
        color = ("#2ca02c" if (value > 0) == higher_is_better else "#d62728") if significant else "#aaa"
        body.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1):.1f}" height="{row - 8}" fill="{color}">'
            f"<title>{escape(label)}: {value:+.1f}% ± {half:.1f}</title></rect>"
        )
        if math.isfinite(half):
            lo, hi = sx(value - half), sx(value + half)
            mid = y + (row - 8) / 2
            body.append(f'<line x1="{lo:.1f}" y1="{mid:.1f}" x2="{hi:.1f}" y2="{mid:.1f}" stroke="#000"/>')
            for xe in (lo, hi):
                body.append(f'<line x1="{xe:.1f}" y1="{mid - 4:.1f}" x2="{xe:.1f}" y2="{mid + 4:.1f}" stroke="#000"/>')
        shown = f"{value:+.1f}%" + ("" if math.isfinite(half) else " ±?")
        body.append(f'<text x="{frame.left - 6}" y="{y + 11}" text-anchor="end" {_FONT}>{escape(label[:26])}</text>')
        body.append(f'<text x="{max(x1, zero) + 4:.1f}" y="{y + 11}" {_FONT} fill="#333">{shown}</text>')
    return _svg(frame, body)


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
) -> str:
    """Scatter of variants with the Pareto front joined and labelled."""
    frame = _Frame(width, height, right=150)
    xs = [x for x, _ in points] or [0.0, 1.0]
    ys = [y for _, y in points] or [0.0, 1.0]
    xt, yt = nice_ticks(min(0.0, min(xs)), max(xs)), nice_ticks(min(0.0, min(ys)), max(ys))
    body = _axes(frame, xt, yt, x_label, y_label, title)
    sx = _scale(xt[0], xt[-1], frame.left, frame.left + frame.plot_w)
    sy = _scale(yt[0], yt[-1], frame.top + frame.plot_h, frame.top)
    front = pareto_front(points, x_goal, y_goal)
    ordered = sorted(front, key=lambda i: points[i][0])
    if len(ordered) > 1:
        path = " ".join(f"{sx(points[i][0]):.1f},{sy(points[i][1]):.1f}" for i in ordered)
        body.append(f'<polyline points="{path}" fill="none" stroke="#d62728" stroke-dasharray="4 3"/>')
    for i, ((x, y), label) in enumerate(zip(points, labels, strict=True)):
        on = i in front
        body.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{5 if on else 3.5}" '
            f'fill="{"#d62728" if on else "#777"}"><title>{escape(label)}</title></circle>'
        )
        if on:
            body.append(f'<text x="{sx(x) + 7:.1f}" y="{sy(y) - 5:.1f}" {_FONT}>{escape(label[:24])}</text>')
    return _svg(frame, body)
