"""The end of a tuning run as a person reads it in a terminal: the ranking with a header and units, the reason once,
the recommended command, and where the reports are — fitted to the terminal's width."""

from __future__ import annotations

import shutil
from pathlib import Path

from servetune.humanize import number
from servetune.report.tables import status_text
from servetune.suite.spec import figure_spec
from servetune.tune.rank import Ranking


def outcome_lines(ranking: Ranking, files: dict[str, Path], width: int | None = None) -> list[str]:
    """Lines of the summary (see the module docstring)."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    objective = ranking.objective
    spec = figure_spec(objective.probe, objective.figure)
    unit = f" ({spec.unit})" if spec and spec.unit else ""
    head = f"{objective.label}{unit}, {'higher' if objective.direction == 'max' else 'lower'} is better"
    value_w, delta_w, status_w = 22, 12, 18
    name_w = max(12, min(40, width - 4 - value_w - delta_w - status_w - 4))
    lines = [
        "",
        f"{'#':>3} {'variant':<{name_w}} {'objective ± 95%':>{value_w}} {'vs baseline':>{delta_w}}  status",
        f"    {head}",
    ]
    for entry in ranking.entries:
        est = entry.objective
        value = "—" if est is None else number(est.mean) + (f" ± {number(est.half_width, 2)}" if est.n > 1 else "")
        d = entry.deltas.get((objective.probe, objective.figure))
        change = "—" if d is None else f"{'' if d.significant else '~'}{d.pct:+.1f}%"
        status = status_text(entry) + (" ★" if ranking.winner is entry else "")
        name = entry.record.variant.name
        name = name if len(name) <= name_w else name[: name_w - 1] + "…"
        lines.append(f"{entry.rank or '-':>3} {name:<{name_w}} {value:>{value_w}} {change:>{delta_w}}  {status}")
    lines += ["", "~ = a tie with the baseline (inside the noise or below the practical threshold)", "", ranking.reason]
    rec = files.get("recommendation")
    if rec is not None and rec.exists():
        body = rec.read_text().rstrip().split("\n")
        lines += ["", *body[1:]] if body and body[0].startswith("# ") else ["", *body]  # its header repeats the reason
    lines.append("")
    lines += [f"{kind:15s} {path}" for kind, path in files.items()]
    return lines
