"""Writes an experiment folder's outputs: summary.csv, results.json, summary.md, report.html and
recommendation.txt.  `write_reports` is what `servetune tune` calls at the end and `servetune report DIR`
calls on a folder's store."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from servetune.fileio import atomic_write_text
from servetune.metrics.export import write_rows_csv
from servetune.report.tables import (
    changes_text,
    column_scale,
    column_title,
    decision_notes,
    display_columns,
    short_value,
    status_text,
    summary_rows,
    time_scale_note,
    tradeoffs,
)
from servetune.secrets import Redactor
from servetune.tune.loop import Outcome
from servetune.tune.results.environment import environment
from servetune.tune.results.rank import Entry, Ranking
from servetune.tune.results.recommend import Recommendation, recommend
from servetune.tune.results.result import VariantRecord
from servetune.tune.schema.experiment import Experiment


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def entry_json(entry: Entry) -> dict[str, Any]:
    record = entry.record
    variant = record.variant
    return {
        "name": variant.name,
        "key": variant.key(),
        "stage": variant.stage,
        "baseline": variant.baseline,
        "status": record.status,
        "failure": record.failure.model_dump() if record.failure else None,
        "skip_reasons": record.skip_reasons,
        "estimated_only": record.estimated,
        "changes": variant.changes,
        "note": variant.note,
        "config": variant.config.model_dump(mode="json"),
        "client": variant.client.model_dump(mode="json"),
        "launch_s": record.launch_s,
        "wall_s": record.wall_s,
        "gpu_minutes": record.gpu_minutes,
        "facts": record.facts,
        "ran_on": record.ran_on,
        "lost": [lost.model_dump(mode="json") for lost in record.lost],
        "rank": entry.rank,
        "tie_with_winner": entry.tie_with_winner,
        "slo_failures": entry.failures,
        "figures": {
            f"{p}.{f}": {"mean": e.mean, "ci95": _finite(e.half_width), "n": e.n} for (p, f), e in entry.figures.items()
        },
        "deltas_pct": {
            f"{p}.{f}": {
                "pct": d.pct,
                "ci95": _finite(d.half_width_pct),
                "significant": d.significant,
                "paired": d.paired,
            }
            for (p, f), d in entry.deltas.items()
        },
        "runs": [
            {
                "probe": r.probe,
                "repeat": r.repeat,
                "wall_s": r.wall_s,
                "time_scale": r.time_scale,
                **r.result.model_dump(mode="json"),
            }
            for r in record.runs
        ],
    }


def results_json(
    exp: Experiment, ranking: Ranking, rec: Recommendation | None, environment: dict[str, Any]
) -> dict[str, Any]:
    return {
        "experiment": exp.model_dump(mode="json"),
        "environment": environment,
        "objective": ranking.objective.model_dump(),
        "winner": ranking.winner.record.variant.name if ranking.winner else None,
        "reason": ranking.reason,
        "time_scale_note": time_scale_note(ranking) or None,
        "recommendation": rec.model_dump() if rec else None,
        "confirmation": [c.as_json() for c in ranking.confirmations],
        "variants": [entry_json(e) for e in ranking.entries],
    }


def write_csv(path: Path, ranking: Ranking, redactor: Redactor | None = None) -> None:
    rows = summary_rows(ranking)
    write_rows_csv(path, redactor.data(rows) if redactor else rows)


def markdown(exp: Experiment, ranking: Ranking, rec: Recommendation | None, environment: dict[str, Any]) -> str:
    objective_key = (ranking.objective.probe, ranking.objective.figure)
    cols = [objective_key, *(c for c in display_columns(ranking) if c != objective_key)]
    head = ["#", "variant", f"{column_title(objective_key)} ★ objective", "status", *map(column_title, cols[1:])]
    head.append("changes")
    lines = [f"# {exp.name}: tuning summary", ""]
    if exp.description:
        lines += [exp.description, ""]
    objective = ranking.objective
    lines += [
        f"Objective: {objective.direction} `{objective.label}`; SLOs: "
        + (", ".join(f"{k} {_bound(k)} {v:g}" for k, v in exp.slos.items()) or "none"),
        "",
    ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    scales = [column_scale(ranking, c) for c in cols]
    for entry in ranking.entries:
        why = "; ".join(entry.failures + entry.record.skip_reasons)
        cells = [
            str(entry.rank or ""),
            entry.record.variant.name + (" ★" if ranking.winner is entry else ""),
            short_value(entry, cols[0], scales[0]),
            status_text(entry) + (f": {why}" if why else ""),
            *[short_value(entry, c, scale) for c, scale in zip(cols[1:], scales[1:], strict=True)],
            changes_text(entry),
        ]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    lines += [
        "",
        "Values are means ± 95% half-width over repeats; (±N%) is the change vs the stage's baseline, "
        f"~ marks a tie by the ranking's rule (inside the noise or below {ranking.min_effect_pct:g}%).",
        "",
    ]
    found = tradeoffs(ranking)
    if found:
        lines += ["## Trade-offs", ""]
        lines += [f"- {t.text(column_title(objective_key))}" for t in found]
        lines.append("")
    estimated = [e.record.variant.name for e in ranking.entries if e.record.estimated]
    if estimated:
        lines += [f"Judged by the simulator's estimate only (not launched): {', '.join(estimated)}.", ""]
    if note := time_scale_note(ranking):
        lines += [note, ""]
    if ranking.confirmations:
        label = column_title((ranking.objective.probe, ranking.objective.figure))
        lines += ["## Confirmation (the winner's curse)", ""]
        lines += [
            "The finalists were measured again with fresh repeats before recommending; the recommendation uses "
            "the confirmed figures.",
            "",
        ]
        lines += [f"- {c.text(label)}" for c in ranking.confirmations] + [""]
    lines += ["## Recommendation", "", ranking.reason, ""]
    notes = decision_notes(ranking)
    lines += [f"- {kind}: {text}" for kind, text in notes] + ([""] if notes else [])
    if rec:
        lines += ["```bash", rec.serve_command, "```", ""]
        if rec.docker_command:
            lines += ["```bash", rec.docker_command, "```", ""]
        lines += [f"- note: {note}" for note in rec.notes] + ([""] if rec.notes else [])
        if rec.sampling_presets:
            lines += ["Client sampling presets:", ""]
            lines += [
                f"- {name}: `{json.dumps(body, ensure_ascii=False)}`" for name, body in rec.sampling_presets.items()
            ]
            lines.append("")
    failed = [e for e in ranking.entries if e.record.status in {"failed", "skipped"}]
    if failed:
        lines += ["## Failed and skipped variants", ""]
        for entry in failed:
            r = entry.record
            why = "; ".join(r.skip_reasons) if r.status == "skipped" else (r.failure.klass if r.failure else "?")
            lines.append(f"- {r.variant.name}: {status_text(entry)}: {why}")
            if r.failure and r.failure.excerpt:
                lines += ["", "```", r.failure.excerpt.strip()[-1500:], "```", ""]
        lines.append("")
    lines += ["## Environment", ""] + [f"- {k}: {v}" for k, v in environment.items()]
    return "\n".join(lines) + "\n"


def _bound(key: str) -> str:
    return "≥" if key == "memory_headroom_pct" else "≤"


def write_reports(
    out_dir: Path, exp: Experiment, ranking: Ranking, rec: Recommendation | None, environment: dict[str, Any]
) -> dict[str, Path]:
    """Writes every output file and returns their paths by kind. The experiment's secrets (API keys, secret-named
    environment values: `servetune.secrets`) are redacted in every one of them."""
    from servetune.report.html import render_html

    redactor = Redactor.of(exp)

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "csv": out_dir / "summary.csv",
        "json": out_dir / "results.json",
        "markdown": out_dir / "summary.md",
        "html": out_dir / "report.html",
        "recommendation": out_dir / "recommendation.txt",
    }
    write_csv(paths["csv"], ranking, redactor)
    results = redactor.data(results_json(exp, ranking, rec, environment))
    atomic_write_text(paths["json"], redactor.text(json.dumps(results, indent=2, default=str)))
    atomic_write_text(paths["markdown"], redactor.text(markdown(exp, ranking, rec, environment)))
    atomic_write_text(paths["html"], redactor.text(render_html(exp, ranking, rec, environment)))
    if rec:
        text = f"# {rec.variant}: {rec.reason}\n"
        text += "".join(f"# {kind}: {note}\n" for kind, note in decision_notes(ranking))
        text += f"{rec.serve_command}\n"
        if rec.docker_command:
            text += f"\n# docker\n{rec.docker_command}\n"
        text += "".join(f"# note: {note}\n" for note in rec.notes)
        text += f"# confirmed: {rec.confirmed}\n" if rec.confirmed else ""
        for name, body in rec.sampling_presets.items():
            text += f"\n# sampling preset {name}\n{json.dumps(body, ensure_ascii=False)}\n"
    else:
        text = f"# no recommendation: {ranking.reason}\n"
    atomic_write_text(paths["recommendation"], redactor.text(text))
    return paths


def write_outcome(exp: Experiment, outcome: Outcome) -> dict[str, Path]:
    """The reports of a finished (or interrupted) run, with its recommendation and environment."""
    return write_ranked(outcome.out_dir, exp, outcome.records, outcome.ranking)


def write_ranked(out_dir: Path, exp: Experiment, records: list[VariantRecord], ranking: Ranking) -> dict[str, Path]:
    """Every report of a ranked experiment folder (a live run's end, or `servetune report DIR`)."""
    versions: dict[str, str | None] = {str(r.variant.config.engine): r.facts.get("version") for r in records}
    return write_reports(out_dir, exp, ranking, recommend(exp, ranking), environment(versions))
