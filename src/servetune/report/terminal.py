"""The end of a tuning run as a person reads it in a terminal: the ranking with a header and units, the reason once,
the trade-offs the objective hides, the recommended command, and where the reports are — fitted to the terminal's
width (names are shortened and prose is wrapped; a command line is left whole, so it can be copied)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from servetune.humanize import number
from servetune.report.tables import column_title, status_text, tradeoffs
from servetune.tune.rank import Ranking


def outcome_lines(ranking: Ranking, files: dict[str, Path], width: int | None = None) -> list[str]:
    """Lines of the summary (see the module docstring)."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    objective = ranking.objective
    better = "higher" if objective.direction == "max" else "lower"
    head = f"{column_title((objective.probe, objective.figure))}, {better} is better"
    value_w, delta_w = 20, 11
    status_w = max(12, min(24, width - 4 - 12 - value_w - delta_w - 3))
    name_w = max(10, min(40, width - 4 - value_w - delta_w - status_w - 3))
    lines = [
        "",
        _fit(
            f"{'#':>3} {'variant':<{name_w}} {'objective ± 95%':>{value_w}} {'vs baseline':>{delta_w}}  status", width
        ),
        _fit(f"    {head}", width),
    ]
    for entry in ranking.entries:
        est = entry.objective
        value = "—" if est is None else number(est.mean) + (f" ± {number(est.half_width, 2)}" if est.n > 1 else "")
        d = entry.deltas.get((objective.probe, objective.figure))
        change = "—" if d is None else f"{'' if d.significant else '~'}{d.pct:+.1f}%"
        status = status_text(entry) + (" ★" if ranking.winner is entry else "")
        name = _short(entry.record.variant.name, name_w)
        row = f"{entry.rank or '-':>3} {name:<{name_w}} {_short(value, value_w):>{value_w}} {change:>{delta_w}}  "
        lines.append(row + _short(status, max(4, width - len(row))))
    lines += ["", *_wrap("~ = a tie with the baseline (inside the noise or below the practical threshold)", width)]
    lines += ["", *_wrap(ranking.reason, width)]
    found = tradeoffs(ranking)
    if found:
        lines += ["", "Trade-offs (better on an SLO metric the objective does not count):"]
        for t in found[:5]:
            lines += _wrap(t.text(column_title((objective.probe, objective.figure))), width, "  - ", "    ")
    rec = files.get("recommendation")
    if rec is not None and rec.exists():
        lines += ["", *_command(rec.read_text(), width)]
    lines.append("")
    lines += [_fit(f"{kind:15s} {path}", width) for kind, path in files.items()]
    return lines


def _command(text: str, width: int) -> list[str]:
    """The recommended `vllm serve` command and its notes from recommendation.txt; its first line (the reason, printed
    above), the docker command and the sampling presets stay in the file."""
    out: list[str] = []
    for line in text.rstrip().split("\n")[1:]:
        if line.startswith(("# docker", "# sampling preset")):
            break
        if line.startswith("# "):
            out += _wrap(line[2:], width, "# ", "#   ")
        elif line:
            out.append(line)
    return [*out, "(the docker command and sampling presets: recommendation.txt)"]


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 1, 0)] + "…"


def _fit(line: str, width: int) -> str:
    return _short(line, width)


def _wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest, break_long_words=True) or [""]
