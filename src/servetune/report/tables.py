"""The ranking flattened into rows: one per variant, the suite's figures as columns (mean, 95% half-width,
delta vs the stage's baseline).  CSV, markdown and HTML all print these rows."""

from __future__ import annotations

import math
from typing import Any

from servetune.humanize import number
from servetune.suite.spec import all_probes, figure_spec
from servetune.tune.estimates import ESTIMATE_PROBE
from servetune.tune.rank import Entry, FigureKey, Ranking


def headline() -> list[FigureKey]:
    """The figures the probes mark as headline (the seeds' summary.csv columns, B1–B6, and the load curve's), in
    suite order."""
    return [(name, f.name) for name, spec in all_probes().items() for f in spec.figures if f.headline]


def higher_is_better(probe: str, figure: str) -> bool | None:
    """The figure's declared direction (None when it has none, or no spec declares it)."""
    spec = figure_spec(probe, figure)
    if spec is None or spec.better == "none":
        return None
    return spec.better == "higher"


def figure_columns(ranking: Ranking, headline_only: bool = False) -> list[FigureKey]:
    """Figures measured by any variant: the objective first, then the headline ones, then the rest sorted."""
    present = {key for entry in ranking.entries for key in entry.figures}
    objective = (ranking.objective.probe, ranking.objective.figure)
    head = [objective] if objective in present else []
    head += [key for key in headline() if key in present and key not in head]
    if headline_only:
        return head
    return head + sorted(present - set(head))


def display_columns(ranking: Ranking) -> list[FigureKey]:
    """Columns of the tables meant for people: the objective, the headline figures (or the first few), then the
    simulator's prediction of the objective (`estimate.<probe>.<figure>`) when the experiment used estimates."""
    columns = [key for key in figure_columns(ranking) if key[0] != ESTIMATE_PROBE]
    shown = [key for key in columns if key in set(headline()) or key == columns[0]] or columns[:6]
    objective = ranking.objective
    predicted = (ESTIMATE_PROBE, objective.label)
    present = any(predicted in entry.figures for entry in ranking.entries)
    return shown + [predicted] if present else shown


def time_scales(ranking: Ranking) -> list[float]:
    """The sim-serve time scales runs were measured at (other than 1: real time)."""
    return sorted({run.time_scale for e in ranking.entries for run in e.record.runs if run.time_scale != 1.0})


def time_scale_note(ranking: Ranking) -> str:
    scales = ", ".join(f"{s:g}" for s in time_scales(ranking))
    if not scales:
        return ""
    return (
        f"Runs against sim-serve at --time-scale {scales} are reported in simulated (real-GPU) time: "
        "measured times × scale, rates ÷ scale."
    )


def _num(value: float | None, digits: int = 4) -> float | str:
    if value is None:
        return ""
    if not math.isfinite(value):
        return "inf"
    return round(value, digits)


def status_text(entry: Entry) -> str:
    record = entry.record
    if record.status == "failed" and record.failure:
        return f"failed ({record.failure.klass})"
    if record.estimated:
        return "estimate only"
    if record.status == "skipped":
        return "skipped"
    if record.status != "done":
        return record.status
    return "meets SLOs" if not entry.failures else "misses SLOs"


def changes_text(entry: Entry) -> str:
    changes = entry.record.variant.changes
    if entry.record.variant.baseline:
        return "(baseline)"
    return "; ".join(f"{k}={v}" for k, v in changes.items()) or "(no change)"


def summary_rows(ranking: Ranking) -> list[dict[str, Any]]:
    """One row per variant for summary.csv."""
    columns = figure_columns(ranking)
    rows = []
    for entry in ranking.entries:
        record = entry.record
        row: dict[str, Any] = {
            "variant": record.variant.name,
            "stage": record.variant.stage,
            "rank": entry.rank or "",
            "status": status_text(entry),
            "tie_with_winner": "yes" if entry.tie_with_winner else "",
            "winner": "yes" if ranking.winner is entry else "",
            "changes": changes_text(entry),
            "objective_mean": _num(entry.objective.mean if entry.objective else None),
            "objective_ci95": _num(entry.objective.half_width if entry.objective else None),
            "slo_failures": "; ".join(entry.failures),
            "failure": (record.failure.excerpt.splitlines() or [""])[-1][:200] if record.failure else "",
            "skip_reasons": "; ".join(record.skip_reasons),
            "estimated_only": "yes" if record.estimated else "",
            "time_scale": ",".join(sorted({f"{r.time_scale:g}" for r in record.runs if r.probe != ESTIMATE_PROBE})),
            "launch_s": _num(record.launch_s, 2),
            "repeats": max((run.repeat for run in record.runs), default=-1) + 1,
        }
        for key in columns:
            name = ".".join(key)
            est = entry.figures.get(key)
            d = entry.deltas.get(key)
            row[name] = _num(est.mean if est else None)
            row[f"{name}.ci95"] = _num(est.half_width if est else None)
            row[f"{name}.delta_pct"] = _num(d.pct if d else None, 2)
            row[f"{name}.delta_ci95"] = _num(d.half_width_pct if d else None, 2)
        rows.append(row)
    return rows


def short_value(entry: Entry, key: FigureKey) -> str:
    """'85.0 ± 2.1 (+20%)' for tables meant for people; `~` marks a change the ranking calls a tie."""
    est = entry.figures.get(key)
    if est is None:
        return "—"
    text = number(est.mean)
    if est.n > 1 and math.isfinite(est.half_width):
        half = est.half_width if est.half_width > 1e-9 * abs(est.mean) else 0.0
        text += f" ± {number(half, 2)}"
    d = entry.deltas.get(key)
    if d is not None:
        mark = "" if d.significant else "~"
        text += f" ({mark}{d.pct:+.1f}%)" if abs(d.pct) < 10 else f" ({mark}{d.pct:+.0f}%)"
    return text
