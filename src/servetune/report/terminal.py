"""The end of a tuning run as a person reads it in a terminal: the decision (the winner against the baseline, with the
interval of the difference), the ranking with a header and units, the reason once, the trade-offs the objective
hides, the recommended command, and where the reports are — fitted to the terminal's width (names are shortened and
prose is wrapped; a command line is left whole, so it can be copied). Each part is a function of its own, so
`servetune demo` composes its one-screen summary from the same lines `servetune tune` prints."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from servetune.humanize import number
from servetune.metrics.slo import BOUNDS
from servetune.report.tables import (
    DECISION_NOTES,
    changes_text,
    column_scale,
    column_title,
    delta_interval,
    delta_text,
    edge_text,
    estimate_text,
    status_text,
    tie_text,
    tied_with_winner,
    tradeoffs,
)
from servetune.suite.registry import figure_spec
from servetune.tune.results.rank import Ranking, edges
from servetune.tune.schema.experiment import Experiment


def terminal_width(width: int | None = None) -> int:
    """The width to fit: the one given, else the terminal's (100 when there is none)."""
    return width or shutil.get_terminal_size((100, 24)).columns


def outcome_lines(ranking: Ranking, files: dict[str, Path], width: int | None = None) -> list[str]:
    """Lines of the summary (see the module docstring)."""
    width = terminal_width(width)
    return [
        "",
        *decision_lines(ranking, width),
        *ranking_lines(ranking, width),
        "",
        *wrap(ranking.reason, width),
        *confirmation_lines(ranking, width),
        *tradeoff_lines(ranking, width),
        *command_lines(files, width),
        "",
        *[_fit(f"{kind:15s} {path}", width) for kind, path in files.items()],
    ]


def confirmation_lines(ranking: Ranking, width: int) -> list[str]:
    """The finalists' re-measurement: each one's first figure, its confirmed figure and the inflation."""
    if not ranking.confirmations:
        return []
    label = ranking.objective.label
    out = ["", "Confirmed with fresh repeats (the winner's curse):"]
    for confirmation in ranking.confirmations:
        out += wrap(confirmation.text(label), width, "  ", "    ")
    return out


def decision_lines(ranking: Ranking, width: int, head: str = "Decision") -> list[str]:
    """What to do, in one sentence: the winner and its objective against the baseline's, with the change and its
    95% interval marked by the ranking's own rule (`Delta.significant`: outside the noise and at least
    `ranking.min_effect_pct`), or why the baseline stays. A variant the ranking ties with the winner is named
    first, as "a tie" with both figures and the interval (so the screen never claims a gain the ranking calls
    noise), and a winner whose numeric flag sits at the largest or smallest value tried says so (`rank.edges`).
    Nothing when no variant won (the reason says why)."""
    winner, base = ranking.winner, ranking.baseline()
    if winner is None or winner.objective is None:
        return []
    objective = ranking.objective
    spec = figure_spec(objective.probe, objective.figure)
    label = spec.label if spec and spec.label else objective.figure.replace("_", " ")
    unit = f" {spec.unit}" if spec and spec.unit and not label.endswith(spec.unit) else ""
    name = winner.record.variant.name
    if base is None or base is winner:
        leader = ranking.entries[0] if ranking.entries else winner
        text = f"{head}: keep the baseline {name} ({label}: {number(winner.objective.mean)}{unit})"
        d = leader.deltas.get((objective.probe, objective.figure))
        if leader is not winner and d is not None:
            text += (
                f": the best mean, {leader.record.variant.name}, is {delta_interval(d)} "
                "against it, a tie (inside the noise or below the practical threshold)"
            )
        return wrap(text + ".", width, "", "  ")
    said = f"{head}: {name} ({changes_text(winner)}) — {label}: {number(winner.objective.mean)}{unit}"
    d = winner.deltas.get((objective.probe, objective.figure))
    ties = "; ".join(tie_text(ranking, e) for e in tied_with_winner(ranking))
    edge = [edge_text(e) for e in edges(ranking)]
    if not base.eligible or base.objective is None or d is None:
        why = "; ".join(base.failures) or status_text(base)
        text = f"{said}{', ' + ties if ties else ''}; the baseline {base.record.variant.name}: {why}."
        return wrap(" ".join([text, *edge]), width, "", "  ")
    verdict = "outside the noise" if d.significant else "a tie: inside the noise or below the practical threshold"
    repeats = (
        f"{winner.objective.n} repeats paired" if d.paired else f"{winner.objective.n} and {base.objective.n} repeats"
    )
    change = f"{delta_interval(d)} (95% interval, {repeats}), {verdict}."
    if ties:
        text = (
            f"{said}, {ties}. Against the baseline {base.record.variant.name} "
            f"({number(base.objective.mean)}{unit}): {change}"
        )
    else:
        text = f"{said} vs {number(base.objective.mean)} for the baseline {base.record.variant.name}: {change}"
    return wrap(" ".join([text, *edge]), width, "", "  ")


def ranking_lines(ranking: Ranking, width: int) -> list[str]:
    """The ranking as a table: a header naming the objective and its unit, one row per variant, and the key of the
    tie mark when a row carries it."""
    objective = ranking.objective
    better = "higher" if objective.direction == "max" else "lower"
    head = f"{column_title((objective.probe, objective.figure))}, {better} is better"
    value_w, delta_w = 20, 11
    status_w = max(12, min(24, width - 4 - 12 - value_w - delta_w - 3))
    name_w = max(10, min(40, width - 4 - value_w - delta_w - status_w - 3))
    columns = f"{'#':>3} {'variant':<{name_w}} {'objective ± 95%':>{value_w}} {'vs baseline':>{delta_w}}  status"
    lines = ["", _fit(columns, width), _fit(f"    {head}", width)]
    tie = False
    scale = column_scale(ranking, (objective.probe, objective.figure))
    for entry in ranking.entries:
        d = entry.deltas.get((objective.probe, objective.figure))
        change = "—" if d is None else delta_text(d)
        tie = tie or change.startswith("~")
        star = " ★" if ranking.winner is entry else " (tie with ★)" if entry.tie_with_winner else ""
        status = status_text(entry) + star
        name = _short(entry.record.variant.name, name_w)
        value = _short(estimate_text(entry.objective, scale), value_w)
        row = f"{entry.rank or '-':>3} {name:<{name_w}} {value:>{value_w}} {change:>{delta_w}}  "
        lines.append(row + _short(status, max(4, width - len(row))))
    if not tie:
        return lines
    return [*lines, "", *wrap("~ = a tie with the baseline (inside the noise or below the practical threshold)", width)]


def tradeoff_lines(ranking: Ranking, width: int, limit: int = 5, per_variant: int = 2) -> list[str]:
    """The trade-offs the objective hides (`report.tables.tradeoffs`), the largest `limit` of them."""
    found = tradeoffs(ranking, per_variant)
    if not found:
        return []
    objective = column_title((ranking.objective.probe, ranking.objective.figure))
    lines = ["", "Trade-offs (better on an SLO metric the objective does not count):"]
    for t in found[:limit]:
        lines += wrap(t.text(objective), width, "  - ", "    ")
    return lines


def command_lines(files: dict[str, Path], width: int) -> list[str]:
    """The recommended command and its notes from recommendation.txt (nothing when there is none)."""
    rec = files.get("recommendation")
    if rec is None or not rec.exists():
        return []
    return ["", *_command(rec.read_text(), width)]


def experiment_lines(exp: Experiment, ranking: Ranking, width: int) -> list[str]:
    """What was tuned, in words: the experiment's description (else the flags its variants change), the SLOs, the
    objective and the suite — read from the experiment and its variants, so it is true of any experiment."""
    varied = sorted({flag for e in ranking.entries for flag in e.record.variant.changes})
    what = exp.description.rstrip(".") if exp.description else f"changing {', '.join(varied) or 'nothing'}"
    slos = ", ".join(_slo_text(key, value) for key, value in exp.slos.items()) or "none"
    objective = column_title((ranking.objective.probe, ranking.objective.figure))
    text = (
        f"Tuned: {exp.name} — {what}; {len(ranking.entries)} variants, {len(exp.suite.probes.enabled())} probes × "
        f"{exp.suite.repeats} repeats; SLOs {slos}; objective: {objective}."
    )
    return wrap(text, width, "", "  ")


def _slo_text(key: str, value: float) -> str:
    """`ttft_p99_ms` 100 → `TTFT p99 ≤ 100 ms`; `error_rate` 0 → `error rate ≤ 0`."""
    sign = "≥" if BOUNDS.get(key) == "lower" else "≤"
    parts = key.split("_")
    if len(parts) == 3 and parts[2] == "ms":
        return f"{parts[0].upper()} {parts[1]} {sign} {value:g} ms"
    return f"{key.replace('_', ' ')} {sign} {value:g}"


def _command(text: str, width: int) -> list[str]:
    """The recommended serve command and its notes from recommendation.txt; its first line (the reason, printed
    above), its ties and edges (the decision above says them), the docker command and the sampling presets stay in
    the file (a last line says so when it has them)."""
    out: list[str] = []
    command: list[str] = []
    for line in text.rstrip().split("\n")[1:]:
        if line.startswith(("# docker", "# sampling preset")):
            return [*out, *_pack(command, width), "(the docker command and sampling presets: recommendation.txt)"]
        if line.startswith(DECISION_NOTES):
            continue  # the decision above said it
        if line.startswith("# "):
            out += wrap(line[2:], width, "# ", "#   ")
        elif line:
            command.append(line)
    return [*out, *_pack(command, width)]


def _pack(command: list[str], width: int) -> list[str]:
    """A command written one option per line (`\\` continued) packed into as few lines as fit the width, each
    option kept whole, so the lines still paste as one shell command."""
    parts = [line.removesuffix("\\").strip() for line in command]
    rows: list[str] = []
    for part in parts:
        if rows and len(rows[-1]) + 1 + len(part) + 2 <= width:
            rows[-1] += " " + part
        else:
            rows.append(part if not rows else "  " + part)
    return [row + " \\" for row in rows[:-1]] + rows[-1:]


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 1, 0)] + "…"


def _fit(line: str, width: int) -> str:
    """A line cut to the width (with an ellipsis)."""
    return _short(line, width)


def wrap(text: str, width: int, first: str = "", rest: str = "", *, whole_words: bool = False) -> list[str]:
    """Prose wrapped to the width; `whole_words` keeps a word longer than the width (a path) whole on its line."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=not whole_words,
        break_on_hyphens=not whole_words,
    ) or [""]
