"""report.html: one static file (inline CSS and SVG, no script, no network) with the recommendation, the
summary table, latency–throughput curves, per-factor deltas with CI bars, a Pareto view, the failures with
their log excerpts, and the environment."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from html import escape
from typing import Any

from servetune.report.svg import Series, delta_bars, line_chart, pareto_chart
from servetune.report.tables import (
    changes_text,
    display_columns,
    figure_columns,
    higher_is_better,
    short_value,
    status_text,
    time_scale_note,
)
from servetune.tune.experiment import Experiment
from servetune.tune.rank import Entry, FigureKey, Ranking
from servetune.tune.recommend import Recommendation

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:22px} h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;display:block;overflow-x:auto} th,td{border:1px solid #ddd;padding:4px 6px;text-align:left}
th{background:#f4f4f4} td:nth-child(2){min-width:110px} td:nth-child(4){min-width:160px} tr.winner td{background:#eaf7ea;font-weight:600} tr.out td{color:#999}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;font-size:12px;white-space:pre-wrap} .note{color:#666;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:16px} .badge{display:inline-block;padding:2px 8px;border-radius:10px;
background:#2ca02c;color:#fff;font-size:12px}
"""

CurveKey = tuple[str, str]


def _curve_points(entry: Entry, x: str, y: str) -> list[tuple[float, float]]:
    """Load-curve points averaged over repeats, per concurrency level."""
    sums: dict[float, list[tuple[float, float]]] = defaultdict(list)
    for run in entry.record.runs:
        if run.probe != "load_curve" or not run.result.ok:
            continue
        for point in run.result.points:
            if x in point and y in point and point[x] is not None and point[y] is not None:
                sums[point.get("concurrency", len(sums))].append((point[x], point[y]))
    return [(sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v)) for _, v in sorted(sums.items())]


def curves_section(ranking: Ranking) -> str:
    charts = []
    for y, label in (("ttft_p99_ms", "p99 TTFT (ms)"), ("tpot_p99_ms", "p99 TPOT (ms)")):
        series = [
            Series(e.record.variant.name, pts) for e in ranking.entries if (pts := _curve_points(e, "output_tok_s", y))
        ]
        if series:
            charts.append(line_chart(series, "output tokens/s", label, f"Latency vs throughput ({label})"))
    if not charts:
        return '<p class="note">The suite ran no load_curve probe, so there are no latency–throughput curves.</p>'
    return '<div class="charts">' + "".join(charts) + "</div>"


def deltas_section(ranking: Ranking) -> str:
    keys: list[FigureKey] = [(ranking.objective.probe, ranking.objective.figure)]
    keys += [k for k in figure_columns(ranking, headline_only=True) if k not in keys and k[0] != "acceptance"][:3]
    charts = []
    for key in keys:
        bars = [
            (e.record.variant.name, e.deltas[key].pct, e.deltas[key].half_width_pct)
            for e in ranking.entries
            if key in e.deltas
        ]
        if bars:
            charts.append(
                delta_bars(
                    bars,
                    f"{key[0]}.{key[1]}: change vs baseline (95% CI)",
                    higher_is_better=higher_is_better(*key) is not False,
                )
            )
    if not charts:
        return '<p class="note">No per-factor deltas: no baseline finished, or no variant shares its figures.</p>'
    note = (
        f'<p class="note">Green/red: the change is outside the 95% interval and at least '
        f"{ranking.min_effect_pct:g}% (the experiment's practical threshold); grey: a tie. "
        "'±?' = one repeat, no interval.</p>"
    )
    return note + '<div class="charts">' + "".join(charts) + "</div>"


def _pareto_axes(ranking: Ranking) -> tuple[FigureKey, FigureKey] | None:
    present = {k for e in ranking.entries for k in e.figures}
    objective = (ranking.objective.probe, ranking.objective.figure)
    throughputs = [objective] if ranking.objective.direction == "max" else []
    throughputs += [("load_curve", "max_output_tok_s"), ("decode_speed", "output_tok_s")]
    latencies = [("short_latency", "e2el_ms"), ("long_prefill", "ttft_s"), ("decode_speed", "tpot_ms")]
    if ranking.objective.direction == "min":
        latencies.insert(0, objective)
    x = next((k for k in throughputs if k in present), None)
    y = next((k for k in latencies if k in present and k != x), None)
    return (x, y) if x and y else None


def pareto_section(ranking: Ranking) -> str:
    axes = _pareto_axes(ranking)
    if axes is None:
        return '<p class="note">Not enough figures for a Pareto view (needs a throughput and a latency).</p>'
    x, y = axes
    done = [e for e in ranking.entries if x in e.figures and y in e.figures]
    labels = [e.record.variant.name for e in done]
    points = [(e.figures[x].mean, e.figures[y].mean) for e in done]
    chart = pareto_chart(labels, points, ".".join(x), ".".join(y), "Pareto view: throughput vs latency")
    return chart + '<p class="note">Red points are on the front: no other variant is both faster and quicker.</p>'


def table_section(ranking: Ranking) -> str:
    cols = display_columns(ranking)
    head = "".join(f"<th>{escape(h)}</th>" for h in ["#", "variant", "changes", "status", *(".".join(c) for c in cols)])
    rows = []
    for e in ranking.entries:
        klass = "winner" if ranking.winner is e else ("" if e.eligible else "out")
        why = "; ".join(e.failures + e.record.skip_reasons)
        cells = [
            str(e.rank or ""),
            e.record.variant.name,
            changes_text(e),
            status_text(e) + (f": {why}" if why else ""),
            *[short_value(e, c) for c in cols],
        ]
        rows.append(f'<tr class="{klass}">' + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def recommendation_section(ranking: Ranking, rec: Recommendation | None) -> str:
    if rec is None:
        return f"<p><b>No recommendation:</b> {escape(ranking.reason)}</p>"
    parts = [
        f'<p><span class="badge">winner</span> <b>{escape(rec.variant)}</b>: {escape(rec.reason)}</p>',
        f"<pre>{escape(rec.serve_command)}</pre>",
    ]
    if rec.docker_command:
        parts.append(f"<pre>{escape(rec.docker_command)}</pre>")
    parts += [f'<p class="note">{escape(note)}</p>' for note in rec.notes]
    if rec.sampling_presets:
        items = "".join(
            f"<li><b>{escape(n)}</b>: <code>{escape(json.dumps(b, ensure_ascii=False))}</code></li>"
            for n, b in rec.sampling_presets.items()
        )
        parts.append(f"<p>Client sampling presets:</p><ul>{items}</ul>")
    return "".join(parts)


def failures_section(ranking: Ranking) -> str:
    items = []
    for e in ranking.entries:
        r = e.record
        if r.status == "skipped":
            what = "estimate only" if r.estimated else "skipped"
            items.append(f"<li><b>{escape(r.variant.name)}</b> {what}: {escape('; '.join(r.skip_reasons))}</li>")
        elif r.status == "failed" and r.failure:
            hint = f" ({escape(r.failure.hint)})" if r.failure.hint else ""
            items.append(
                f"<li><b>{escape(r.variant.name)}</b> failed during {escape(r.failure.during)}: "
                f"{escape(r.failure.klass)}{hint}<pre>{escape(r.failure.excerpt.strip()[-2000:])}</pre></li>"
            )
    return f"<ul>{''.join(items)}</ul>" if items else "<p>None: every variant finished.</p>"


def render_html(exp: Experiment, ranking: Ranking, rec: Recommendation | None, environment: dict[str, Any]) -> str:
    slos = ", ".join(f"{escape(k)} {'≥' if k == 'memory_headroom_pct' else '≤'} {v:g}" for k, v in exp.slos.items())
    env_rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in environment.items())
    objective = ranking.objective
    estimated = [e.record.variant.name for e in ranking.entries if e.record.estimated]
    est_note = (
        f'<p class="note">Judged by the simulator\'s estimate only: {escape(", ".join(estimated))}</p>'
        if estimated
        else ""
    )
    if scale_note := time_scale_note(ranking):
        est_note += f'<p class="note">{escape(scale_note)}</p>'
    finite = [e for e in ranking.entries if e.objective and not math.isfinite(e.objective.half_width)]
    single = (
        '<p class="note">Some variants have one repeat: no confidence interval, so they tie with any variant '
        "they are close to.</p>"
        if finite
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>servetune: {escape(exp.name)}</title>
<style>{_CSS}</style></head><body>
<h1>servetune tuning report: {escape(exp.name)}</h1>
<p>{escape(exp.description or "")}</p>
<p>Objective: <b>{objective.direction} {escape(objective.probe)}.{escape(objective.figure)}</b>.
SLOs: {slos or "none"}. Variants: {len(ranking.entries)}.</p>
<h2>Recommendation</h2>{recommendation_section(ranking, rec)}
<h2>Summary</h2>{table_section(ranking)}
<p class="note">Mean ± 95% half-width over repeats; (±N%) vs the stage's baseline, ~ = inside the noise.</p>
{est_note}{single}
<h2>Latency–throughput curves</h2>{curves_section(ranking)}
<h2>Per-factor deltas vs baseline</h2>{deltas_section(ranking)}
<h2>Pareto view</h2>{pareto_section(ranking)}
<h2>Failed and skipped variants</h2>{failures_section(ranking)}
<h2>Environment</h2><table>{env_rows}</table>
</body></html>
"""
