"""The bench report: one static HTML file (inline CSS and SVG, no script, no network) for one or more measured runs —
servetune's own or imported from vLLM bench serve, GuideLLM or AIPerf (`metrics.imports`).

From the top: every validity warning and every note about how a run was read (what a person must know before
trusting a number); a table of the runs with vLLM's figures, grouped by shape (`shapes`: each sweep — one tool, one
series, one kind of load — then the single runs) and sorted by number; the latency–throughput curve of each sweep,
named with its tool, its points labelled with their level, the single runs as points beside them; the TTFT, TPOT,
ITL and E2EL distributions as CDFs, one line per run; each run over time — output tokens per second, requests in
flight, each request's TTFT at its send time, with the warm-up and cool-down shaded, so a warm-up that leaked in or
a server saturating during the run is seen; the figures of each traffic class of a mix. Figures are recomputed from
per-request records with servetune's (vLLM's) definitions wherever a run has them, so runs of different tools
compare; where a file only has the tool's aggregates, the table says "as reported".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Literal

import numpy as np

from servetune.fileio import atomic_write_text
from servetune.humanize import number
from servetune.metrics.export import write_rows_csv
from servetune.metrics.runs import TOOL_NAMES, BenchRun
from servetune.metrics.summary import summarize
from servetune.metrics.timeline import timeline
from servetune.report.svg import Band, Series, cdf_chart, line_chart, scatter_chart

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1220px;color:#222;padding:0 16px}
h1{font-size:22px} h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
h3{font-size:14px;margin:16px 0 4px}
table{border-collapse:collapse;font-size:12px} th,td{border:1px solid #ddd;padding:4px 6px;text-align:right}
th{background:#f4f4f4} td.name,th.name{text-align:left}
.warnings{background:#fff6e0;border:1px solid #e0b040;padding:8px 14px;border-radius:4px}
.warnings.ok{background:#eef8ee;border-color:#9c9}
.warnings li{margin:2px 0} .note{color:#666;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:12px} .charts svg{max-width:100%;height:auto}
.wide{overflow-x:auto}
"""

METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"))
COLUMNS = (
    ("completed", "completed", 0),
    ("failed", "failed", 0),
    ("request_throughput", "req/s", 3),
    ("output_throughput", "output tok/s", 3),
    ("median_ttft_ms", "TTFT p50 (ms)", 3),
    ("p99_ttft_ms", "TTFT p99 (ms)", 3),
    ("median_tpot_ms", "TPOT p50 (ms)", 3),
    ("p99_tpot_ms", "TPOT p99 (ms)", 3),
    ("p99_itl_ms", "ITL p99 (ms)", 3),
    ("p99_e2el_ms", "E2EL p99 (ms)", 3),
    ("request_goodput", "goodput (req/s)", 3),
)
"""The runs table: vLLM's flat figure, its header with unit, and significant digits (0: a count)."""


ShapeKind = Literal["rate sweep", "concurrency sweep", "single runs"]


@dataclass(frozen=True)
class Shape:
    """Runs measured alike at several load levels — one tool, one series name (`RunSource.label`) and one kind of
    load, rates or concurrencies: a sweep, drawn as one curve — or, under "single runs", every run that is not
    part of one. A rate sweep and a c16 run that share a label are two shapes, never one curve."""

    kind: ShapeKind
    runs: tuple[BenchRun, ...]

    @property
    def title(self) -> str:
        if self.kind == "single runs":
            return "single runs"
        source = self.runs[0].source
        return f"{self.kind}: {source.label} ({TOOL_NAMES[source.tool]})"

    @property
    def legend(self) -> str:
        """The curve's name in a chart's legend: the series and the tool that measured it."""
        source = self.runs[0].source
        return f"{source.label} ({TOOL_NAMES[source.tool]})"


def _by_level(run: BenchRun) -> tuple[float, str, str]:
    """Numeric order (1, 4, 16, 64 req/s, never 1, 16, 4, 64), then when it ran."""
    level = run.source.level if run.source.level is not None else float("inf")
    return level, run.source.started_at or "", run.source.path


def shapes(runs: Sequence[BenchRun]) -> list[Shape]:
    """The runs grouped by shape (see `Shape`): the sweeps first, by tool and series, then the single runs, each
    sorted numerically by level."""
    groups: dict[tuple[str, str, str], list[BenchRun]] = defaultdict(list)
    for run in runs:
        s = run.source
        if s.kind is not None and s.level is not None:
            groups[(s.tool, s.label, s.kind)].append(run)
    sweeps: list[Shape] = []
    in_sweep: set[int] = set()
    tools = list(TOOL_NAMES)
    for key in sorted(groups, key=lambda k: (tools.index(k[0]), k[1], k[2])):
        members = groups[key]
        if len({r.source.level for r in members}) < 2:
            continue
        kind: ShapeKind = "rate sweep" if key[2] == "rate" else "concurrency sweep"
        sweeps.append(Shape(kind, tuple(sorted(members, key=_by_level))))
        in_sweep.update(id(r) for r in members)
    single = sorted(
        (r for r in runs if id(r) not in in_sweep),
        key=lambda r: (r.source.kind or "~", _by_level(r)[0], tools.index(r.source.tool), r.source.label),
    )
    return sweeps + ([Shape("single runs", tuple(single))] if single else [])


def _num(value: float | None, digits: int) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if digits == 0 else number(value, digits)


def warnings_section(runs: Sequence[BenchRun]) -> str:
    """Validity warnings, failures and reading notes of every run, first thing on the page."""
    items = []
    for run in runs:
        name = escape(run.name)
        if run.summary is not None:
            items += [f"<li><b>{name}</b>: {escape(w)}</li>" for w in run.summary.validity.warnings]
        elif (failed := run.figures.get("failed")) and failed > 0:
            items.append(f"<li><b>{name}</b>: {failed:,.0f} requests failed (as the tool reported)</li>")
        items += [f"<li><b>{name}</b>: {escape(n)}</li>" for n in run.source.notes]
    if not items:
        return '<div class="warnings ok" id="warnings">No validity warnings: every run is as asked.</div>'
    return f'<div class="warnings" id="warnings"><b>Read these first</b><ul>{"".join(items)}</ul></div>'


def runs_table(groups: Sequence[Shape]) -> str:
    """One row per run, grouped by shape (a heading row for each sweep and for the single runs)."""
    head = '<th class="name">run</th><th class="name">tool</th><th class="name">load</th>'
    head += "".join(f"<th>{escape(label)}</th>" for _, label, _ in COLUMNS) + '<th class="name">figures</th>'
    rows = []
    for shape in groups:
        rows.append(f'<tr class="shape"><th class="name" colspan="{len(COLUMNS) + 4}">{escape(shape.title)}</th></tr>')
        for run in shape.runs:
            measured = sum(1 for r in run.records if r.phase == "measure")
            how = f"recomputed from {measured:,} requests" if run.summary is not None else "as reported"
            cells = [
                f'<td class="name">{escape(run.source.label)}</td>',
                f'<td class="name">{escape(TOOL_NAMES[run.source.tool])}</td>',
                f'<td class="name">{escape(run.source.level_text)}</td>',
                *(f"<td>{_num(run.figure(key), digits)}</td>" for key, _, digits in COLUMNS),
                f'<td class="name">{escape(how)}</td>',
            ]
            rows.append(f'<tr class="run">{"".join(cells)}</tr>')
    return f'<div class="wide"><table id="runs"><tr>{head}</tr>{"".join(rows)}</table></div>'


def curve_section(groups: Sequence[Shape]) -> str:
    """Latency against throughput: each sweep one curve, its points labelled with their level, named with its tool in
    the legend; the single runs beside them as points of their own."""
    sweeps = [shape for shape in groups if shape.kind != "single runs"]
    if not sweeps:
        return '<p class="note">No series of load levels (a sweep), so no latency–throughput curve.</p>'
    single = [run for shape in groups if shape.kind == "single runs" for run in shape.runs]
    lines = [(shape.legend, list(shape.runs)) for shape in sweeps]
    lines += [(f"{run.name} ({TOOL_NAMES[run.source.tool]})", [run]) for run in single]
    charts = []
    for key, label in (("p99_ttft_ms", "p99 TTFT (ms)"), ("median_tpot_ms", "median TPOT (ms)")):
        series = []
        for name, members in lines:
            pts, labels = [], []
            for run in members:
                x, y = run.figure("output_throughput"), run.figure(key)
                if x is not None and y is not None:
                    pts.append((x, y))
                    labels.append(run.source.level_text)
            if pts:
                series.append(Series(name, pts, labels))
        if series:
            charts.append(line_chart(series, "output tokens/s", label, f"{label} vs throughput", width=600))
    note = (
        '<p class="note">A line joins the levels of one sweep (one tool, one series, one kind of load: rates or '
        "concurrencies), in order; a single run is a point of its own.</p>"
    )
    return '<div class="charts">' + "".join(charts) + "</div>" + (note if single else "")


def _values(run: BenchRun, metric: str) -> list[float]:
    ok = [r for r in run.records if r.phase == "measure" and r.ok]
    if metric == "ttft":
        return [r.ttft_ns / 1e6 for r in ok if r.ttft_ns is not None]
    if metric == "tpot":
        return [t / 1e6 for r in ok if (t := r.tpot_ns) is not None]
    if metric == "itl":
        gaps = [np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) for r in ok if len(r.chunk_ns) > 1]
        return (np.concatenate(gaps) / 1e6).tolist() if gaps else []
    return [r.e2el_ns / 1e6 for r in ok]


def distributions_section(runs: Sequence[BenchRun]) -> str:
    with_records = [run for run in runs if run.records]
    if not with_records:
        return '<p class="note">No run has per-request data, so no distributions.</p>'
    charts = [
        cdf_chart(
            [(run.name, _values(run, metric)) for run in with_records],
            f"{label} (ms)",
            f"{label} distribution",
            width=590,
        )
        for metric, label in METRICS
    ]
    return '<div class="charts">' + "".join(charts) + "</div>"


def timeline_section(runs: Sequence[BenchRun]) -> str:
    parts = []
    for run in runs:
        line = timeline(run.records, buckets=25)
        if line is None:
            continue
        bands = [
            Band(start, end, {"warmup": "warm-up", "cooldown": "cool-down"}[p])
            for p, start, end in line.phases
            if p != "measure"
        ]
        steps: list[tuple[float, float]] = []
        for t, n in line.in_flight:
            if steps:
                steps.append((t, steps[-1][1]))
            steps.append((t, n))
        charts = [
            line_chart(
                [Series("", line.tokens_per_s)],
                "seconds since the first request",
                f"output tokens/s ({number(line.bucket_s, 2)} s buckets)",
                "Throughput over time",
                width=390,
                height=260,
                bands=bands,
                markers=False,
            ),
            line_chart(
                [Series("", steps)],
                "seconds since the first request",
                "requests in flight",
                "In flight",
                width=390,
                height=260,
                bands=bands,
                markers=False,
            ),
            scatter_chart(
                [Series("", line.ttft)],
                "send time (s)",
                "TTFT (ms)",
                "TTFT of each request",
                width=390,
                height=260,
                bands=bands,
            ),
        ]
        parts.append(f'<h3>{escape(run.name)}</h3><div class="charts">{"".join(charts)}</div>')
    if not parts:
        return '<p class="note">No run has per-request data, so no time series.</p>'
    return "".join(parts)


def classes_section(runs: Sequence[BenchRun]) -> str:
    """Per traffic class figures of the runs of a mix (more than one class)."""
    parts = []
    for run in runs:
        measured = [r for r in run.records if r.phase == "measure"]
        names = sorted({r.traffic_class for r in measured})
        if len(names) < 2:
            continue
        rows = []
        for name in names:
            group = [r for r in measured if r.traffic_class == name]
            s = summarize(group)
            cells = [
                f'<td class="name">{escape(name)}</td>',
                f"<td>{len(group):,}</td>",
                f"<td>{number(100 * len(group) / len(measured), 3)}%</td>",
                f"<td>{s.failed:,}</td>",
                *(
                    f"<td>{_num(getattr(getattr(s, f'{m}_ms'), q), 3)}</td>"
                    for m, q in (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99"), ("e2el", "p99"))
                ),
                f"<td>{_num(s.output_tokens_per_request.mean, 3)}</td>",
            ]
            rows.append(f"<tr>{''.join(cells)}</tr>")
        head = "".join(
            f"<th>{h}</th>"
            for h in (
                "requests", "share", "failed", "TTFT p50 (ms)", "TTFT p99 (ms)", "TPOT p50 (ms)", "TPOT p99 (ms)",
                "E2EL p99 (ms)", "output tokens",
            )
        )  # fmt: skip
        parts.append(
            f'<h3>{escape(run.name)}</h3><table class="classes"><tr><th class="name">class</th>{head}</tr>'
            f"{''.join(rows)}</table>"
        )
    if not parts:
        return '<p class="note">No run mixes traffic classes.</p>'
    return "".join(parts)


def render_bench_html(runs: Sequence[BenchRun], title: str) -> str:
    groups = shapes(runs)
    runs = [run for shape in groups for run in shape.runs]
    tools = sorted({TOOL_NAMES[r.source.tool] for r in runs})
    models = sorted({r.source.model for r in runs if r.source.model})
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>servetune bench: {escape(title)}</title>
<style>{_CSS}</style></head><body>
<h1>servetune bench report: {escape(title)}</h1>
<p>{len(runs)} run(s) by {escape(", ".join(tools))}; model {escape(", ".join(models) or "not recorded")}.</p>
{warnings_section(runs)}
<h2>Runs</h2>{runs_table(groups)}
<p class="note">vLLM's definitions (docs/metrics.md): TTFT = first token − send;
TPOT = (E2EL − TTFT)/(output tokens − 1) per request; ITL = every gap between streamed chunks;
E2EL = last byte − send. "recomputed": servetune computed the figures from the file's per-request timings,
so runs of different tools compare; "as reported": the tool's own aggregates, mapped onto vLLM's names.</p>
<h2>Latency–throughput</h2>{curve_section(groups)}
<h2>Distributions</h2>{distributions_section(runs)}
<h2>Over time</h2>
<p class="note">Shaded: warm-up and cool-down (not measured). TTFT and requests in flight climbing while the token rate
stays flat is a server past saturation; high TTFT only at the start is a warm-up that leaked in.</p>
{timeline_section(runs)}
<h2>Traffic classes</h2>{classes_section(runs)}
</body></html>
"""


def runs_rows(runs: Sequence[BenchRun]) -> list[dict[str, object]]:
    """The runs table as CSV rows (written by metrics.export's one CSV writer), in the table's order, with each
    run's shape."""
    rows: list[dict[str, object]] = []
    for shape in shapes(runs):
        for run in shape.runs:
            s = run.source
            row: dict[str, object] = {
                "run": s.label,
                "tool": s.tool,
                "shape": shape.kind,
                "kind": s.kind or "",
                "level": s.level,
                "file": s.path,
            }
            row.update({key: run.figure(key) for key, _, _ in COLUMNS})
            rows.append(row)
    return rows


def write_bench_report(folder: Path, runs: Sequence[BenchRun], title: str, html: Path | None = None) -> dict[str, Path]:
    """Writes the bench report (and runs.csv beside it) atomically; returns the paths by kind."""
    html = html or folder / "report.html"
    paths = {"html": html, "csv": html.with_name("runs.csv")}
    atomic_write_text(paths["html"], render_bench_html(runs, title))
    write_rows_csv(paths["csv"], runs_rows(runs))
    return paths
