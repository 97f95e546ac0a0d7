"""report.html: one static file (inline CSS and SVG, no script, no network) with the recommendation, the trade-offs
the objective alone hides, the summary table (the rank, the variant and the objective frozen on the left, so the
column that decides the ranking never scrolls out of sight), latency–throughput curves with their concurrency levels
labelled, per-factor deltas with CI bars, a Pareto view with the winner ringed and labelled, the failures with their
log excerpts, and the environment."""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

from servetune.report.svg import Series, delta_bars, line_chart, pareto_chart
from servetune.report.tables import (
    changes_text,
    column_scale,
    column_title,
    decision_notes,
    display_columns,
    figure_columns,
    higher_is_better,
    point_estimates,
    short_value,
    status_text,
    time_scale_note,
    tradeoffs,
)
from servetune.tune.results.rank import Entry, FigureKey, Ranking
from servetune.tune.results.recommend import Recommendation
from servetune.tune.schema.experiment import Experiment

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px} h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:separate;border-spacing:0;font-size:12px}
th,td{border-right:1px solid #ddd;border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;background:#fff}
tr:first-child th{border-top:1px solid #ddd} th:first-child,td:first-child{border-left:1px solid #ddd}
th{background:#f4f4f4} td.num{text-align:right;white-space:nowrap}
#summary .rank{position:sticky;left:0;min-width:22px;max-width:22px;z-index:2}
#summary .variant{position:sticky;left:35px;min-width:190px;max-width:190px;z-index:2}
#summary .objective{position:sticky;left:238px;min-width:130px;z-index:2;border-right:2px solid #2ca02c}
#summary th.objective{background:#e3f2e3}
.changes{color:#555;font-size:11px;font-weight:normal;overflow-wrap:anywhere}
tr.winner td{background:#eaf7ea;font-weight:600} tr.out td{color:#999}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;font-size:12px;white-space:pre-wrap}
.note{color:#666;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:16px} .charts svg{max-width:100%;height:auto}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;background:#2ca02c;color:#fff;font-size:12px}
#tradeoffs li{margin:4px 0}
p.tie,p.edge{border-left:3px solid #e0b040;padding-left:8px}
"""


def _curve(entry: Entry, y: str) -> tuple[list[tuple[float, float]], list[str]]:
    """A variant's load curve (output tok/s, y) averaged over repeats per concurrency, with the levels as labels."""
    points = point_estimates(entry)
    levels = sorted({level for level, name in points if name == y and (level, "output_tok_s") in points})
    pts = [(points[(c, "output_tok_s")].mean, points[(c, y)].mean) for c in levels]
    return pts, [f"c{c}" for c in levels]


def curves_section(ranking: Ranking) -> str:
    charts = []
    labelled = ranking.winner or ranking.baseline()
    for y, label in (("ttft_p99_ms", "p99 TTFT (ms)"), ("tpot_p99_ms", "p99 TPOT (ms)")):
        series: list[Series] = []
        for e in ranking.entries:
            pts, levels = _curve(e, y)
            if pts:  # the concurrency of each point is written on one curve (the winner's), in every tooltip
                series.append(Series(e.record.variant.name, pts, levels if e is labelled or not series else []))
        if series:
            charts.append(line_chart(series, "output tokens/s", label, f"Latency vs throughput ({label})"))
    if not charts:
        return '<p class="note">The suite ran no load_curve probe, so there are no latency–throughput curves.</p>'
    note = '<p class="note">Points are load levels (cN = N requests in flight), labelled on the winner\'s curve.</p>'
    return '<div class="charts">' + "".join(charts) + "</div>" + note


def deltas_section(ranking: Ranking) -> str:
    keys: list[FigureKey] = [(ranking.objective.probe, ranking.objective.figure)]
    keys += [k for k in figure_columns(ranking, headline_only=True) if k not in keys and k[0] != "acceptance"][:3]
    charts = []
    for key in keys:
        bars = [
            (e.record.variant.name, e.deltas[key].pct, e.deltas[key].half_width_pct, e.deltas[key].significant)
            for e in ranking.entries
            if key in e.deltas
        ]
        if bars:
            charts.append(
                delta_bars(
                    bars,
                    f"{column_title(key)}: change vs baseline (95% CI)",
                    higher_is_better=higher_is_better(*key) is not False,
                )
            )
    if not charts:
        return '<p class="note">No per-factor deltas: no baseline finished, or no variant shares its figures.</p>'
    note = (
        f'<p class="note">Green/red: the change is outside the 95% interval and at least '
        f"{ranking.min_effect_pct:g}% (the experiment's practical threshold) — the rule the ranking's ties use; "
        "grey: a tie. '±?' = one repeat, no interval.</p>"
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
    winner = next((i for i, e in enumerate(done) if e is ranking.winner), None)
    chart = pareto_chart(
        labels, points, column_title(x), column_title(y), "Pareto view: throughput vs latency", highlight=winner
    )
    return chart + (
        '<p class="note">Red points are on the front: no other variant is both faster and quicker. '
        "The ringed ★ point is the recommended variant.</p>"
    )


def tradeoffs_section(ranking: Ranking) -> str:
    found = tradeoffs(ranking)
    reference = ranking.winner or ranking.baseline()
    if reference is None:
        return '<p class="note">No winner or baseline to weigh the variants against.</p>'
    if not found:
        return (
            f'<p id="tradeoffs">No variant is significantly better than {escape(reference.record.variant.name)} on an '
            "SLO metric the objective does not count.</p>"
        )
    objective = column_title((ranking.objective.probe, ranking.objective.figure))
    items = "".join(f"<li>{escape(t.text(objective))}</li>" for t in found)
    return (
        f'<ul id="tradeoffs">{items}</ul><p class="note">Each is outside the 95% interval and at least '
        f"{ranking.min_effect_pct:g}% better (the ranking's rule), on a latency the objective "
        f"({escape(ranking.objective.label)}) does not count; the price is the objective's change.</p>"
    )


def table_section(ranking: Ranking) -> str:
    objective = (ranking.objective.probe, ranking.objective.figure)
    rest = [c for c in display_columns(ranking) if c != objective]
    head = (
        '<th class="rank">#</th><th class="variant">variant <span class="changes">(changes)</span></th>'
        f'<th class="objective" title="{escape(".".join(objective))}">{escape(column_title(objective))} ★ objective'
        "</th><th>status</th>"
        + "".join(f'<th title="{escape(".".join(c))}">{escape(column_title(c))}</th>' for c in rest)
    )
    scales = {c: column_scale(ranking, c) for c in (objective, *rest)}
    rows = []
    for e in ranking.entries:
        klass = "winner" if ranking.winner is e else ("" if e.eligible else "out")
        why = "; ".join(e.failures + e.record.skip_reasons)
        cells = [
            f'<td class="rank">{e.rank or ""}</td>',
            f'<td class="variant">{escape(e.record.variant.name)}<div class="changes">{escape(changes_text(e))}</div>'
            "</td>",
            f'<td class="objective num">{escape(short_value(e, objective, scales[objective]))}</td>',
            f"<td>{escape(status_text(e) + (f': {why}' if why else ''))}</td>",
            *(f'<td class="num">{escape(short_value(e, c, scales[c]))}</td>' for c in rest),
        ]
        rows.append(f'<tr class="{klass}">' + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table id="summary"><tr>{head}</tr>{"".join(rows)}</table></div>'


def recommendation_section(ranking: Ranking, rec: Recommendation | None) -> str:
    if rec is None:
        return f"<p><b>No recommendation:</b> {escape(ranking.reason)}</p>"
    parts = [f'<p><span class="badge">winner</span> <b>{escape(rec.variant)}</b>: {escape(rec.reason)}</p>']
    parts += [
        f'<p class="{kind}" id="{kind}-{i}">{escape(text)}</p>'
        for i, (kind, text) in enumerate(decision_notes(ranking))
    ]
    parts.append(f"<pre>{escape(rec.serve_command)}</pre>")
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
<p>Objective: <b>{objective.direction} {escape(column_title((objective.probe, objective.figure)))}</b>
({escape(objective.probe)}.{escape(objective.figure)}).
SLOs: {slos or "none"}. Variants: {len(ranking.entries)}.</p>
<h2>Recommendation</h2>{recommendation_section(ranking, rec)}
<h2>Trade-offs</h2>{tradeoffs_section(ranking)}
<h2>Summary</h2>{table_section(ranking)}
<p class="note">Mean ± 95% half-width over repeats; (±N%) vs the stage's baseline; ~ = a tie by the ranking's rule
(inside the noise or below {ranking.min_effect_pct:g}%, the experiment's practical threshold).</p>
{est_note}{single}
<h2>Latency–throughput curves</h2>{curves_section(ranking)}
<h2>Per-factor deltas vs baseline</h2>{deltas_section(ranking)}
<h2>Pareto view</h2>{pareto_section(ranking)}
<h2>Failed and skipped variants</h2>{failures_section(ranking)}
<h2>Environment</h2><table>{env_rows}</table>
</body></html>
"""
