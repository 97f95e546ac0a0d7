"""The ranking flattened into rows: one per variant, the suite's figures as columns (mean, 95% half-width,
delta vs the stage's baseline), and the trade-offs the objective alone hides.  CSV, markdown, HTML and the
terminal all print these rows; every number passes through `servetune.humanize` (`number`; `interval` for a mean
with its half-width) and every "significant" is `tune.stats.Delta.significant` — the ranking's own rule."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from servetune.humanize import interval, number
from servetune.suite.registry import all_probes, figure_spec
from servetune.tune.results.rank import Edge, Entry, FigureKey, Ranking, edges
from servetune.tune.results.stats import Delta, Estimate, delta, estimate
from servetune.tune.search.estimates import ESTIMATE_PROBE


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
    return [*shown, predicted] if present else shown


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


def estimate_text(est: Estimate | None, scale: float | None = None) -> str:
    """'85.0 ± 2.1': a mean and its 95% half-width for people by `humanize.interval`'s one rule (the mean alone
    from one repeat); `scale` is the largest mean of its column (`column_scale`), beside which float dust is 0."""
    if est is None:
        return "—"
    return interval(est.mean, est.half_width if est.n > 1 else None, scale=scale)


def column_scale(ranking: Ranking, key: FigureKey) -> float | None:
    """The largest |mean| of a figure over the variants: what each of its values is read beside."""
    means = [abs(est.mean) for e in ranking.entries if (est := e.figures.get(key)) is not None]
    finite = [m for m in means if math.isfinite(m)]
    return max(finite) if finite else None


def delta_text(d: Delta) -> str:
    """'+20%', '~+1.2%': a change against the baseline; `~` marks one the ranking calls a tie. A change that rounds
    to zero carries no sign ('~0.0%', never '~-0.0%')."""
    mark = "" if d.significant else "~"
    places = 1 if abs(d.pct) < 10 else 0
    pct = round(d.pct, places) + 0.0
    return f"{mark}{pct:+.{places}f}%" if pct else f"{mark}{0:.{places}f}%"


def delta_interval(d: Delta) -> str:
    """'+18% ± 50%': a change and its 95% interval, by `humanize.interval`'s rule (no tie mark), read against the
    whole (100%)."""
    return interval(d.pct, d.half_width_pct, scale=100.0, signed=True, unit="%")


def short_value(entry: Entry, key: FigureKey, scale: float | None = None) -> str:
    """'85.0 ± 2.1 (+20%)' for tables meant for people; `~` marks a change the ranking calls a tie; `scale` as in
    `estimate_text`."""
    est = entry.figures.get(key)
    if est is None:
        return "—"
    d = entry.deltas.get(key)
    return estimate_text(est, scale) + (f" ({delta_text(d)})" if d is not None else "")


def tied_with_winner(ranking: Ranking) -> list[Entry]:
    """The variants the ranking ties with its winner (the winner left out)."""
    return [e for e in ranking.entries if e.tie_with_winner and e is not ranking.winner and e.objective is not None]


def tie_text(ranking: Ranking, other: Entry) -> str:
    """'a tie with X (6.8 ± 3.3): +18% ± 50% (95% interval), inside the noise or below the practical threshold':
    the winner against a variant the ranking ties with it, both figures and the interval of the difference, by
    the ranking's own rule (`Delta.significant`)."""
    winner = ranking.winner
    assert winner is not None and winner.objective is not None and other.objective is not None
    scale = column_scale(ranking, (ranking.objective.probe, ranking.objective.figure))
    d = delta(winner.objective, other.objective, ranking.min_effect_pct)
    change = "" if d is None else f": {delta_interval(d)} (95% interval{', paired' if d.paired else ''})"
    figure = estimate_text(other.objective, scale)
    why = "inside the noise or below the practical threshold"
    return f"a tie with {other.record.variant.name} ({figure}){change}, {why}"


def edge_text(edge: Edge) -> str:
    """A winner's flag at the edge of the values tried (`rank.edges`), in a sentence."""
    tried = ", ".join(f"{v:g}" for v in edge.tried)
    return (
        f"The best is at the edge of the range tried: {edge.flag}={edge.value:g} is the {edge.side} value "
        f"tried ({tried}), so a wider range may do better."
    )


DECISION_NOTES = ("# tie: ", "# edge: ")
"""How recommendation.txt marks the decision's notes (`decision_notes`)."""


def decision_notes(ranking: Ranking) -> list[tuple[str, str]]:
    """What the decision screen says beyond the ranking's reason, for the files (recommendation.txt, summary.md,
    report.html): each tie with the winner (`tie_text`) and each flag at the edge of the range tried (`edge_text`),
    as (kind, sentence), kind `tie` or `edge`."""
    winner = ranking.winner
    if winner is None or winner.objective is None:
        return []
    ties = [("tie", f"{winner.record.variant.name} is {tie_text(ranking, e)}.") for e in tied_with_winner(ranking)]
    return ties + [("edge", edge_text(e)) for e in edges(ranking)]


def column_title(key: FigureKey) -> str:
    """A column's header for people: the figure's label and unit (`decode tok/s (tok/s)`), the probe when the label
    alone is ambiguous."""
    probe, figure = key
    if probe == ESTIMATE_PROBE:
        return f"simulator estimate of {figure}"
    spec = figure_spec(probe, figure)
    if spec is None:
        return f"{probe}.{figure}"
    label = spec.label or figure.replace("_", " ")
    return label + (f" ({spec.unit})" if spec.unit and not label.endswith(spec.unit) else "")


PointKey = tuple[int, str]
"""(concurrency, point figure) of a load curve, e.g. (16, "ttft_p99_ms")."""


def point_estimates(entry: Entry) -> dict[PointKey, Estimate]:
    """Each load-curve level's figures as a mean with a 95% CI over the repeats that reached that level (each value
    with its run's draws: a level's load is drawn from its run's seeds)."""
    values: dict[PointKey, list[tuple[float, str | None]]] = defaultdict(list)
    for run in entry.record.runs:
        if run.probe != "load_curve" or not run.result.ok:
            continue
        for point in run.result.points:
            level = point.get("concurrency")
            if level is None:
                continue
            for name, value in point.items():
                if name != "concurrency" and isinstance(value, int | float) and math.isfinite(value):
                    values[(int(level), name)].append((float(value), run.result.draw))
    return {
        key: est for key, xs in values.items() if (est := estimate([v for v, _ in xs], [d for _, d in xs])) is not None
    }


@dataclass(frozen=True)
class TradeOff:
    """A variant far better than the reference on an SLO metric the objective does not count, and what it costs."""

    variant: str
    reference: str
    metric: str
    """The figure for people, e.g. `TTFT p99 at concurrency 16`."""
    unit: str
    value: float
    reference_value: float
    change: Delta
    price: Delta | None
    """The objective's change against the reference (None when one of them has no objective)."""

    def text(self, objective: str) -> str:
        """`B3-mnbt-2048: TTFT p99 at concurrency 16 −70% (1,240 → 372 ms) vs defaults, for output tok/s −1.3%`."""
        unit = f" {self.unit}" if self.unit else ""
        head = (
            f"{self.variant}: {self.metric} {self.change.pct:+.0f}% ({number(self.reference_value)} → "
            f"{number(self.value)}{unit}) vs {self.reference}"
        )
        if self.price is None:
            return head
        tie = " (a tie: inside the noise or below the practical threshold)" if not self.price.significant else ""
        return f"{head}, for {objective} {self.price.pct:+.1f}%{tie}"


SLO_POINT_FIGURES = ("ttft_p99_ms", "tpot_p99_ms", "itl_p99_ms", "e2el_p99_ms", "ttft_p50_ms", "tpot_p50_ms")
"""The load-curve figures a trade-off may name: the percentiles latency SLOs bound."""


def tradeoffs(ranking: Ranking, per_variant: int = 2) -> list[TradeOff]:
    """Variants significantly better than the winner (or, without one, the baseline) on an SLO metric other than the
    objective — a latency of a probe that declares one, or a load-curve level's latency percentile — with the price
    in the objective. "Significantly" is the ranking's own rule (`Delta.significant`: outside the 95% interval and at
    least `ranking.min_effect_pct`), the one behind the ties and every delta mark. Each variant's largest gains
    first, at most `per_variant` of them; the list is ordered by the size of the gain."""
    reference = ranking.winner or ranking.baseline()
    if reference is None:
        return []
    threshold = ranking.min_effect_pct
    objective = (ranking.objective.probe, ranking.objective.figure)
    ref_points = point_estimates(reference)
    found: list[TradeOff] = []
    for entry in ranking.entries:
        if entry is reference or entry.record.status != "done":
            continue
        price = (
            delta(entry.objective, reference.objective, threshold)
            if entry.objective is not None and reference.objective is not None
            else None
        )
        gains: list[TradeOff] = []
        for key, est in entry.figures.items():
            spec = figure_spec(*key)
            if (
                key == objective
                or spec is None
                or spec.slo is None
                or spec.better == "none"
                or key not in reference.figures
            ):
                continue
            gain = _gain(est, reference.figures[key], threshold, spec.better == "higher")
            if gain is not None:
                gains.append(
                    _tradeoff(
                        entry, reference, spec.label or key[1], spec.unit, est, reference.figures[key], gain, price
                    )
                )
        points = point_estimates(entry)
        for (level, name), est in points.items():
            ref = ref_points.get((level, name))
            if name not in SLO_POINT_FIGURES or ref is None:
                continue
            gain = _gain(est, ref, threshold, higher=False)
            if gain is not None:
                metric, q = name.removesuffix("_ms").rsplit("_", 1)
                label = f"{metric.upper()} {q} at concurrency {level}"
                gains.append(_tradeoff(entry, reference, label, "ms", est, ref, gain, price))
        gains.sort(key=lambda t: -abs(t.change.pct))
        families: set[str] = set()
        for best in gains:  # one per metric (the level where it gains most), the largest first
            family = best.metric.split(" at concurrency")[0]
            if family not in families and len(families) < per_variant:
                families.add(family)
                found.append(best)
    return sorted(found, key=lambda t: -abs(t.change.pct))


def _gain(est: Estimate, ref: Estimate, threshold: float, higher: bool) -> Delta | None:
    d = delta(est, ref, threshold)
    if d is None or not d.significant or (d.pct > 0) != higher:
        return None
    return d


def _tradeoff(
    entry: Entry,
    reference: Entry,
    metric: str,
    unit: str,
    est: Estimate,
    ref: Estimate,
    gain: Delta,
    price: Delta | None,
) -> TradeOff:
    return TradeOff(
        variant=entry.record.variant.name,
        reference=reference.record.variant.name,
        metric=metric,
        unit=unit,
        value=est.mean,
        reference_value=ref.mean,
        change=gain,
        price=price,
    )
