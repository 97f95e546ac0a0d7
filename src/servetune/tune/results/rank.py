"""Ranking: keep the variants that meet every SLO, order them by the objective's mean over repeats, call a
variant a tie with the leader when the leader's change against it is not significant (`stats.Delta.significant`:
inside the noise, or smaller than the experiment's `ranking.min_effect_pct` — the very rule behind every delta
mark in the reports), and break the tie toward the simpler (fewer changes from the baseline), then cheaper (fewer
GPUs, less memory reserved) config."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servetune.metrics.slo import BOUNDS, is_latency_slo, missed_repeats, slo_miss
from servetune.suite.registry import all_probes, figure_spec
from servetune.tune.results.confirm import Confirmation
from servetune.tune.results.correctness import PROBE as CORRECTNESS, Verdict, verdict
from servetune.tune.results.result import RunResult, VariantRecord
from servetune.tune.results.stats import Delta, Estimate, delta, estimate
from servetune.tune.schema.experiment import Experiment, Objective

FigureKey = tuple[str, str]
"""(probe, figure), e.g. ("decode_speed", "output_tok_s")."""


def aggregate(record: VariantRecord) -> dict[FigureKey, Estimate]:
    """Each figure of each probe as a mean with a 95% CI over the repeats that measured it, each value with the
    load draws it was measured on (what `stats.delta` pairs two variants' repeats by)."""
    values: dict[FigureKey, list[tuple[float, str | None]]] = defaultdict(list)
    for run in record.runs:
        if not run.result.ok:
            continue
        for name, value in run.result.figures.items():
            if value is not None and math.isfinite(value):
                values[(run.probe, name)].append((value, run.result.draw))
    return {
        key: est for key, xs in values.items() if (est := estimate([v for v, _ in xs], [d for _, d in xs])) is not None
    }


def repeats(record: VariantRecord) -> dict[int, list[RunResult]]:
    """The variant's runs by repeat (every probe of the suite runs once per repeat)."""
    out: dict[int, list[RunResult]] = defaultdict(list)
    for run in record.runs:
        out[run.repeat].append(run)
    return dict(sorted(out.items()))


def slo_failures(exp: Experiment, record: VariantRecord, figures: dict[FigureKey, Estimate]) -> list[str]:
    """Why a finished variant misses the SLOs (empty = meets them all), each SLO judged in each repeat and the
    repeats joined by the one rule (`slo.missed_repeats`: every repeat must meet it). In a repeat, latency SLOs
    are judged by a probe that judges them (the load curve: some load level must meet them all, so its goodput
    is > 0) when the suite ran one, else on the worst figure the probes declare for that latency metric; lower
    bounds (memory headroom) on the lowest figure that declares them; the error rate over every request the
    repeat sent."""
    out: list[str] = []
    probes = all_probes()
    by_repeat = repeats(record)
    latency = {k: v for k, v in exp.slos.items() if is_latency_slo(k)}
    ran = {probe for probe, _ in figures}
    judges = sorted(p for p in ran if p in probes and probes[p].judges_latency_slos)
    if latency and judges:
        for probe in judges:
            met = [_goodput(runs, probe) > 0 for runs in by_repeat.values() if any(r.probe == probe for r in runs)]
            if (missed := missed_repeats(met)) is not None:
                out.append(f"no {probe} level met the latency SLOs {missed}")
    elif latency:
        for key, bound in latency.items():
            metric = key.split("_")[0]
            worst = [_extreme(runs, metric, max) for runs in by_repeat.values()]
            out += _judged(key, bound, worst)
    if "error_rate" in exp.slos:
        rates = [(rate, None) for runs in by_repeat.values() if (rate := error_rate(runs)) is not None]
        out += _judged("error_rate", exp.slos["error_rate"], rates, unmeasured_ok=True)
    for key, bound in exp.slos.items():
        if BOUNDS.get(key) == "lower":
            out += _judged(key, bound, [_extreme(runs, key, min) for runs in by_repeat.values()])
    return out


Measured = tuple[float, FigureKey | None]
"""A repeat's value of an SLO's figure, and the figure it was read from (None for the error rate)."""


def _judged(key: str, bound: float, values: Sequence[Measured | None], unmeasured_ok: bool = False) -> list[str]:
    """One SLO over the repeats' values (None where a repeat did not measure it), by `slo.missed_repeats`; the
    worst value is named."""
    pairs = [v for v in values if v is not None]
    if not pairs:
        return [] if unmeasured_ok else [f"{key} was not measured"]
    met = [slo_miss(key, value, bound) is None for value, _ in pairs]
    missed = missed_repeats(met)
    if missed is None:
        return []
    lower = BOUNDS.get(key) == "lower"
    value, where = (min if lower else max)(pairs, key=lambda p: p[0])
    spec = figure_spec(*where) if where is not None else None
    text = slo_miss(key, value, bound, spec.label, spec.unit) if spec is not None else slo_miss(key, value, bound)
    return [f"{text} {missed}"]


def _goodput(runs: list[RunResult], probe: str) -> float:
    values = [r.result.figures.get("goodput_rps") for r in runs if r.probe == probe and r.result.ok]
    return max((v for v in values if v is not None and math.isfinite(v)), default=0.0)


def _extreme(runs: list[RunResult], slo: str, pick: Callable[..., Measured]) -> Measured | None:
    """The highest (`max`) or lowest (`min`) figure of one repeat that declares `slo`, with where it is."""
    found: list[Measured] = [
        (value, (run.probe, name))
        for run in runs
        if run.result.ok
        for name, value in run.result.figures.items()
        if value is not None and math.isfinite(value) and _slo_of((run.probe, name)) == slo
    ]
    return pick(found, key=lambda f: f[0]) if found else None


def error_rate(runs: list[RunResult]) -> float | None:
    """Failed requests / requests sent over the runs (None when they sent none)."""
    total = sum(run.result.requests for run in runs)
    return None if total == 0 else sum(run.result.failed_requests for run in runs) / total


def _slo_of(key: FigureKey) -> str | None:
    spec = all_probes().get(key[0])
    figure = spec.figure(key[1]) if spec else None
    return figure.slo if figure else None


def complexity(record: VariantRecord) -> int:
    return len(record.variant.changes)


def cost(record: VariantRecord) -> tuple[float, float]:
    """(GPUs, memory fraction reserved): lower is cheaper."""
    flags = record.variant.config.flags
    gpus = _number(flags.get("tensor-parallel-size"), 1.0) * _number(flags.get("pipeline-parallel-size"), 1.0)
    return gpus, _number(flags.get("gpu-memory-utilization"), 0.0)


def _number(value: object, default: float) -> float:
    """A numeric flag value (the checks made sure it is one); `default` when it is unset."""
    return float(value) if isinstance(value, int | float | str) and value != "" else default


@dataclass
class Entry:
    """One variant's standing."""

    record: VariantRecord
    figures: dict[FigureKey, Estimate]
    objective: Estimate | None
    failures: list[str]
    rank: int | None = None
    tie_with_winner: bool = False
    deltas: dict[FigureKey, Delta] = field(default_factory=dict)
    correctness: Verdict | None = None
    """Its greedy answers against the baseline's (`correctness` probe); a failed gate is one of `failures`."""

    @property
    def eligible(self) -> bool:
        return self.record.status == "done" and not self.failures and self.objective is not None


@dataclass
class Ranking:
    objective: Objective
    entries: list[Entry]
    winner: Entry | None
    reason: str
    min_effect_pct: float = 0.0
    """The practical threshold the ties and the delta marks used."""
    confirmations: list[Confirmation] = field(default_factory=list)
    """The finalists re-measured before recommending (`confirm`): the winner is chosen among their confirmed
    figures."""

    def baseline(self) -> Entry | None:
        return next((e for e in self.entries if e.record.variant.baseline), None)


def rank(exp: Experiment, records: list[VariantRecord]) -> Ranking:
    """Ranks finished variants (failed and skipped ones are listed after, with their reasons)."""
    objective = exp.resolved_objective()
    threshold = exp.ranking.min_effect_pct
    entries = []
    for record in records:
        figures = aggregate(record)
        failures = slo_failures(exp, record, figures) if record.status == "done" else []
        if record.status == "done" and (objective.probe, objective.figure) not in figures:
            failures.append(f"objective {objective.probe}.{objective.figure} was not measured")
        entries.append(Entry(record, figures, figures.get((objective.probe, objective.figure)), failures))
    _add_deltas(entries, threshold)
    _gate(exp, entries)
    sign = 1.0 if objective.direction == "max" else -1.0
    eligible = sorted((e for e in entries if e.eligible), key=lambda e: -sign * e.objective.mean)  # type: ignore[union-attr]
    for i, entry in enumerate(eligible, 1):
        entry.rank = i
    confirmations = _confirmations(entries, objective.direction)
    confirming = [e for e in entries if e.record.variant.confirms]
    # Once finalists are re-measured, only their confirmed figures may win: the first ones were chosen for
    # looking best, and so look better than they are.
    pool = [e for e in eligible if e.record.variant.confirms] if confirming else eligible
    if not pool:
        reason = "no variant finished and met every SLO"
        if confirming:
            why = "; ".join(f"{e.record.variant.name}: {'; '.join(e.failures) or e.record.status}" for e in confirming)
            reason = f"none of the {len(confirming)} finalists met every SLO when re-measured ({why})"
        return Ranking(objective, _ordered(entries, eligible), None, reason, threshold, confirmations)
    leader = pool[0]
    ties = [e for e in pool if e is leader or not _beats(leader, e, threshold)]
    winner = min(ties, key=lambda e: (complexity(e.record), cost(e.record), -sign * e.objective.mean))  # type: ignore[union-attr]
    for entry in ties:
        entry.tie_with_winner = True
    reason = _reason(objective, leader, winner, ties)
    if confirming:
        reason += f" (among the {len(confirming)} finalists re-measured with fresh repeats)"
    return Ranking(objective, _ordered(entries, eligible), winner, reason, threshold, confirmations)


def _gate(exp: Experiment, entries: list[Entry]) -> None:
    """The correctness gate of every finished variant against the baseline of its stage (a re-measured finalist:
    of the stage it was first measured in); a failed gate keeps it out of the ranking."""
    params = exp.suite.probes.params(CORRECTNESS)
    if params is None:
        return
    loss = float(getattr(params, "max_loss_pct", 0.0))
    baselines = {e.record.variant.stage: e.record for e in entries if e.record.variant.baseline}
    stage_of = {e.record.key: e.record.variant.stage for e in entries}
    for entry in entries:
        variant = entry.record.variant
        base = baselines.get(stage_of.get(variant.confirms or "", variant.stage))
        if entry.record.status != "done" or base is None or base.key == entry.record.key:
            continue
        entry.correctness = verdict(entry.record, base, loss)
        if entry.correctness is not None and not entry.correctness.passed:
            entry.failures.append(entry.correctness.text())


def _confirmations(entries: list[Entry], goal: str) -> list[Confirmation]:
    """Each re-measured finalist beside its first measurement (the figures a ranking without the confirmation
    would have recommended on)."""
    by_key = {e.record.key: e for e in entries}
    out = []
    for entry in entries:
        first = by_key.get(entry.record.variant.confirms or "")
        if first is None or first.objective is None:
            continue
        out.append(
            Confirmation(first.record.variant.name, entry.record.variant.name, first.objective, entry.objective, goal)
        )
    return out


@dataclass(frozen=True)
class Edge:
    """A flag the winner changes whose value is the largest or smallest of the values tried for it in the
    winner's stage: the best may lie beyond the range, so the range is worth widening."""

    flag: str
    value: float
    side: str
    """"largest" or "smallest"."""
    tried: list[float]


def edges(ranking: Ranking) -> list[Edge]:
    """The winner's changed numeric flags at the edge of the values its stage measured (baseline included);
    none for the baseline, for a flag with one value tried, or for a non-numeric flag."""
    winner = ranking.winner
    if winner is None:
        return []
    stage = [
        e
        for e in ranking.entries
        if e.record.variant.stage == winner.record.variant.stage and e.record.status == "done"
    ]
    out = []
    for flag, raw in winner.record.variant.changes.items():
        value = _numeric(raw)
        tried = sorted({v for e in stage if (v := _numeric(e.record.variant.config.flags.get(flag))) is not None})
        if value is None or len(tried) < 2:
            continue
        if value in (tried[0], tried[-1]):
            out.append(Edge(flag, value, "largest" if value == tried[-1] else "smallest", tried))
    return out


def _numeric(value: object) -> float | None:
    """A flag's value as a number, when it is one (booleans and words are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _ordered(entries: list[Entry], eligible: list[Entry]) -> list[Entry]:
    rest = [e for e in entries if not e.eligible]
    return eligible + rest


def _beats(leader: Entry, other: Entry, threshold: float) -> bool:
    """The leader's objective differs from `other`'s significantly, measured against `other` (so for the
    baseline it is exactly the delta mark the reports show)."""
    assert leader.objective is not None and other.objective is not None
    d = delta(leader.objective, other.objective, threshold)
    return d is not None and d.significant


def _add_deltas(entries: list[Entry], threshold: float) -> None:
    by_stage: dict[str, Entry] = {e.record.variant.stage: e for e in entries if e.record.variant.baseline}
    stage_of = {e.record.key: e.record.variant.stage for e in entries}
    for entry in entries:
        variant = entry.record.variant
        # a re-measured finalist is compared with the baseline of the stage it was first measured in
        base = by_stage.get(stage_of.get(variant.confirms or "", variant.stage))
        if base is None or base is entry:
            continue
        for key, est in entry.figures.items():
            if key in base.figures and (d := delta(est, base.figures[key], threshold)) is not None:
                entry.deltas[key] = d


def _reason(objective: Objective, leader: Entry, winner: Entry, ties: list[Entry]) -> str:
    spec = figure_spec(objective.probe, objective.figure)
    name = spec.label if spec is not None and spec.label else objective.label
    if len(ties) == 1:
        return f"{winner.record.variant.name} has the best {name}, significantly ahead of every other variant"
    others = ", ".join(e.record.variant.name for e in ties if e is not winner)
    if winner is leader:
        return (
            f"{winner.record.variant.name} has the best {name}; it ties with {others} (a difference inside the "
            "noise or below the practical threshold) and is also the simplest or cheapest of them"
        )
    return (
        f"{leader.record.variant.name} has the best mean {name}, but it is not significantly ahead of "
        f"{len(ties) - 1} other(s); within the tie {winner.record.variant.name} is simpler or cheaper "
        f"({complexity(winner.record)} change(s) from the baseline)"
    )
