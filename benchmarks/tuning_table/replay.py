"""The replay study: every strategy of servetune's tuner, at several budgets, over many seeds, run unchanged
(`servetune.tune.loop.run_experiment` with `executor: replay`) against a measured table, scored against the
table's own exhaustive grid.

    .venv/bin/python -m benchmarks.tuning_table.replay                       # both tables, 100 seeds
    .venv/bin/python -m benchmarks.tuning_table.replay --seeds 5 --tables synthetic   # a quick look
    .venv/bin/python -m benchmarks.tuning_table.replay --tables measured   # again after new cells: the other
                                                                          # table's section from its last run

The report (RESULTS.md) has a section per table that has a run under `--out` (`summary.csv`, and `info.json`: when
and how it ran), so a table is run again only when its data changed (`--tables ''` only writes the report again); a
measured table's section opens with its cells' figures and starts.

Per table, objective (a/b/c of the README), strategy, budget and seed, one tune; per run:
- the recommended cell (the ranking's winner, after the confirmation of the finalists where the tuner runs one);
- its regret: the table's measured mean (all its repeats) of the objective against the best feasible cell's, in %
  of the best (for (a), feasible = every repeat's TTFT p99 within the SLO, servetune's rule across repeats);
- whether it is the grid's best, or tied with it by servetune's rule (`stats.delta`, `Delta.significant`: inside
  the 95% interval of the two cells' measured repeats — paired repeat by repeat, as repeat k of every cell was
  measured on the same draw — or below 2%);
- the GPU time the run spent (every launch, warm-up and repeat the replay charged, the confirmation's included) as
  a fraction of the grid's (every cell launched once, warmed up, and measured in three repeats of the probe);
- the inflation of the confirmed winner (its figure as the search saw it against its re-measurement).

Strategies: `grid` (every cell; the reference), `grid-declared` (the same in declared order: the restart-cost order
of `tune/search/order.py` only groups variants sharing a launch, and here every cell is its own launch), `random`
and `tpe` (a search of the table's factors with `budget_gpu_minutes` = the budget's share of the grid's minutes),
`prune` (the simulator judges every cell and only the baseline and the best `keep` launch, keep = the budget's
share of the cells), and `halving` (a two-rung successive halving from the tuner's parts: every cell screened with
one short repeat, then the best `confirm.finalists` re-measured with three; the tuner has no multi-rung halving).
The prune's simulator runs with `benchmarks/device_campaign/profiles/h200_qwen3.6-27b_vllm0.24.0.json`, fitted on
the 2026-12-01 device campaign's H1 points (another session, other probes): nothing of this table.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CALIBRATION = REPO / "benchmarks/device_campaign/profiles/h200_qwen3.6-27b_vllm0.24.0.json"
TABLES = {"measured": HERE, "synthetic": HERE / "synthetic"}
OBJECTIVES = {
    "a": ("a_tput", "output_tok_s", "max"),
    "b": ("b_goodput", "goodput_rps", "max"),
    "c": ("c_tpot", "tpot_p50_ms", "min"),
}
BUDGETS = (0.10, 0.25, 0.50, 1.00)
STRATEGIES = ("grid", "grid-declared", "random", "tpe", "prune", "halving")
MIN_EFFECT_PCT = 2.0


@dataclass(frozen=True)
class Job:
    table: str
    objective: str
    strategy: str
    budget: float
    seed: int


def _values(table: Any) -> dict[str, list[Any]]:
    """Each factor's values that some measured cell has, in the grid's order (the default first)."""
    seen = {name: {v.factors[name] for v in table.variants.values()} for name in table.factors}
    return {name: [x for x in values if x in seen[name]] for name, values in table.factors.items()}


def experiment(job: Job, table: Any, grid_minutes: float) -> tuple[Any, bool]:
    """The job's experiment (and whether the declared order is kept)."""
    from servetune.tune.execution.replay_table import fixed_load_params
    from servetune.tune.schema.experiment import Experiment

    probe, figure, goal = OBJECTIVES[job.objective]
    params = {
        k: v for k, v in fixed_load_params(table.probes[probe], table.goodput.get(probe)).items() if v is not None
    }
    values = _values(table)
    base = {"max-model-len": 32768, **{name: vals[0] for name, vals in values.items()}}
    varied = {name: vals for name, vals in values.items() if len(vals) > 1}
    cells = math.prod(len(v) for v in varied.values())
    slo = table.slos.get("a", {}).get("ttft_p99_ms") if job.objective == "a" else None
    data: dict[str, Any] = {
        "name": f"{job.objective}-{job.strategy}",
        "engine": {"engine": "vllm", "model": "qwen3.6-27b", "version": "0.24.0", "flags": base},
        "hardware": {"gpu": "H200"},
        "suite": {"repeats": 3, "warmup_requests": 0, "probes": {"fixed_load": params}},
        "objective": {"probe": "fixed_load", "figure": figure, "goal": goal},
        "slos": {"ttft_p99_ms": slo} if slo else {},
        "executor": {"kind": "replay", "table": str(table.path), "seed": job.seed},
        "ranking": {"min_effect_pct": MIN_EFFECT_PCT},
    }
    grid = {"grid": varied}
    if job.strategy in ("grid", "grid-declared"):
        data["variants"] = grid
    elif job.strategy in ("random", "tpe"):
        space = {name: {"choice": vals} for name, vals in varied.items()}
        data["variants"] = {
            "search": {
                "space": space,
                "budget_gpu_minutes": job.budget * grid_minutes,
                "max_trials": 3 * cells,
                "seed": job.seed,
                "sampler": job.strategy,
            }
        }
    elif job.strategy == "prune":
        data["variants"] = grid
        keep = max(1, min(cells - 1, round(job.budget * cells) - 1))
        data["estimate"] = {"mode": "prune", "keep": keep, "calibration": str(CALIBRATION)}
    else:  # halving: screen every cell with one repeat, confirm the best with three
        data["variants"] = grid
        data["suite"]["repeats"] = 1
        data["confirm"] = {"mode": "on", "finalists": max(2, round(job.budget * cells)), "repeats": 3}
    return Experiment.model_validate(data), job.strategy == "grid-declared"


@dataclass(frozen=True)
class Truth:
    """The table's grid for one objective: each cell's measured repeats, which cells are feasible, the best."""

    values: dict[str, list[float]]
    draws: dict[str, list[str]]
    """Each value's load draw (its repeat number: repeat k of every cell was measured on seed k)."""
    feasible: set[str]
    best: str | None
    grid_minutes: float


def truth(table: Any, objective: str) -> Truth:
    probe, figure, goal = OBJECTIVES[objective]
    slo = table.slos.get("a", {}).get("ttft_p99_ms") if objective == "a" else None
    values, draws, feasible, minutes = {}, {}, set(), 0.0
    for cell in table.variants.values():
        reps = [r for r in cell.repeats.get(probe, []) if r.ok and figure in r.figures]
        values[cell.id] = [r.figures[figure] for r in reps]
        draws[cell.id] = [f"repeat {r.repeat}" for r in reps]
        walls = [r.wall_s for r in cell.repeats.get(probe, [])]
        minutes += (cell.ready_s + cell.warmup_s + 3 * (statistics.fmean(walls) if walls else 0.0)) / 60
        if reps and (slo is None or all(r.figures.get("ttft_p99_ms", math.inf) <= slo for r in reps)):
            feasible.add(cell.id)
    sign = 1 if goal == "max" else -1
    best = max(feasible, key=lambda c: sign * statistics.fmean(values[c]), default=None)
    return Truth(values, draws, feasible, best, minutes)


def run(job: Job) -> dict[str, Any]:
    from servetune.tune.execution.replay_table import ReplayTable
    from servetune.tune.loop import run_experiment

    table = ReplayTable.load(TABLES[job.table])
    t = truth(table, job.objective)
    exp, declared = experiment(job, table, t.grid_minutes)
    with tempfile.TemporaryDirectory(prefix="tuning-replay-") as tmp:
        outcome = run_experiment(
            exp, Path(tmp) / "run", emit=lambda _: None, reorder=not declared, predict=_cached_predictor(job, exp)
        )
    spent = sum(r.gpu_minutes for r in outcome.records)
    measured = len({r.variant.confirms or r.key for r in outcome.records if r.status == "done"})
    winner = outcome.ranking.winner
    cell = table.find("vllm", dict(winner.record.variant.config.flags)) if winner else None
    row: dict[str, Any] = {
        **job.__dict__,
        "cells": len(table.variants),
        "measured_variants": measured,
        "spent_frac": spent / t.grid_minutes,
        "recommended": cell.id if cell else "",
        "best": t.best or "",
        "feasible_pick": bool(cell and cell.id in t.feasible),
        "feasible_cells": len(t.feasible),
    }
    inflation = next(
        (
            c.inflation_pct
            for c in outcome.ranking.confirmations
            if winner and c.confirmed_as == winner.record.variant.name
        ),
        None,
    )
    row["inflation_pct"] = inflation if inflation is not None else ""
    return row | score(t, job.objective, cell.id if cell else None)


def score(t: Truth, objective: str, pick: str | None) -> dict[str, Any]:
    """A recommendation's regret against the grid's best and whether it is the best or tied with it."""
    from servetune.tune.results.stats import delta, estimate

    if t.best is None:  # nothing feasible: the right answer is no recommendation
        return {"regret_pct": "", "best_or_tied": pick is None}
    if pick is None or pick not in t.feasible:
        return {"regret_pct": "", "best_or_tied": False}
    goal = OBJECTIVES[objective][2]
    best, got = statistics.fmean(t.values[t.best]), statistics.fmean(t.values[pick])
    a, b = (estimate(t.values[c], t.draws[c]) for c in (pick, t.best))
    d = delta(a, b, MIN_EFFECT_PCT) if a and b else None
    return {
        "regret_pct": 100 * ((best - got) if goal == "max" else (got - best)) / abs(best),
        "best_or_tied": pick == t.best or (d is not None and not d.significant),
    }


def rescored(path: Path, table: str) -> list[dict[str, Any]]:
    """Another study's runs.csv (the one before repeats were paired), each pick scored again by this study's rule,
    so that `best/tie` means the same in both."""
    from servetune.tune.execution.replay_table import ReplayTable

    loaded = ReplayTable.load(TABLES[table])
    truths = {objective: truth(loaded, objective) for objective in OBJECTIVES}
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            parsed = {
                **row,
                "budget": float(row["budget"]),
                "spent_frac": float(row["spent_frac"]),
                "feasible_cells": int(row["feasible_cells"]),
                "inflation_pct": float(row["inflation_pct"]) if row["inflation_pct"] else "",
            }
            out.append(parsed | score(truths[row["objective"]], row["objective"], row["recommended"] or None))
    return out


_PREDICTIONS: dict[tuple[str, str], dict[str, Any]] = {}


def _cached_predictor(job: Job, exp: Any) -> Any:
    """The simulator's predictions of one table's cells for one objective, made once per worker: they depend on
    neither the seed nor the budget, and the prune strategy asks for them in every run."""
    from servetune.tune.search.estimates import predictor

    memo = _PREDICTIONS.setdefault((job.table, job.objective), {})
    made: list[Any] = []

    def predict(config: Any) -> Any:
        key = config.key()
        if key not in memo:
            if not made:
                made.append(predictor(exp))
            memo[key] = made[0](config)
        return memo[key]

    return predict


def jobs(tables: list[str], seeds: int) -> list[Job]:
    out = []
    for table in tables:
        for objective in OBJECTIVES:
            for strategy in STRATEGIES:
                budgets = (1.0,) if strategy.startswith("grid") else BUDGETS
                for budget in budgets:
                    out += [Job(table, objective, strategy, budget, seed) for seed in range(seeds)]
    return out


SUMMARY_COLUMNS = [
    "table",
    "objective",
    "strategy",
    "budget",
    "seeds",
    "spent_pct_mean",
    "spent_pct_max",
    "regret_pct_median",
    "regret_pct_p90",
    "within_2pct",
    "best_or_tied",
    "infeasible_or_none",
    "inflation_pct_mean",
    "feasible_cells",
]


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["table"], r["objective"], r["strategy"], r["budget"])].append(r)
    out = []
    for (table, objective, strategy, budget), rs in groups.items():
        regrets = [r["regret_pct"] for r in rs if r["regret_pct"] != ""]
        inflations = [r["inflation_pct"] for r in rs if r["inflation_pct"] != ""]
        spent = [100 * r["spent_frac"] for r in rs]
        out.append(
            {
                "table": table,
                "objective": objective,
                "strategy": strategy,
                "budget": budget,
                "seeds": len(rs),
                "spent_pct_mean": round(statistics.fmean(spent), 1),
                "spent_pct_max": round(max(spent), 1),
                "regret_pct_median": round(statistics.median(regrets), 2) if regrets else "",
                "regret_pct_p90": round(_quantile(regrets, 0.9), 2) if regrets else "",
                "within_2pct": round(sum(1 for x in regrets if x <= 2.0) / len(rs), 3),
                "best_or_tied": round(sum(1 for r in rs if r["best_or_tied"]) / len(rs), 3),
                "infeasible_or_none": round(sum(1 for r in rs if r["regret_pct"] == "") / len(rs), 3),
                "inflation_pct_mean": round(statistics.fmean(inflations), 2) if inflations else "",
                "feasible_cells": rs[0]["feasible_cells"],
            }
        )
    return out


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns or list(rows[0]), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


LABELS = {
    "measured": "MEASURED: the committed H200 table as it stands (real vLLM 0.24.0 figures; only the cells measured "
    "so far)",
    "synthetic": "SYNTHETIC: 16 cells drawn from the noise model of synthetic.py (not measurements: this proves the "
    "machinery, not the claim)",
}


BEFORE = (
    "`before` = the same study, the same tables, run by servetune as it was before repeats were paired (commit "
    "ebe1510: each variant's repeats drawn with seeds of their own, and in the replay the table repeat that stands "
    "for a variant's repeat r drawn per variant; ties by Welch's interval of two independent samples), its picks "
    "scored again by this study's rule (`summary_before.csv`, from that run's `runs.csv` by `--before`). Only where a "
    "table has that file: one whose cells have not changed since that run."
)


def ran(info: dict[str, Any]) -> str:
    """When and how a table's section was run (its info.json)."""
    return (
        f"Run: `.venv/bin/python -m benchmarks.tuning_table.replay --tables {info['tables']} --seeds {info['seeds']}` "
        f"on {info['when']} ({info['runs']} tunes in {info['wall_s']:.0f} s on {info['workers']} workers; load "
        f"average {info['load'][0]:.1f} → {info['load'][1]:.1f} on the shared 2-core machine)."
    )


def cell_section(table: str) -> list[str]:
    """A measured table's cells: each one's starts and per objective the mean ± sd of its repeats (build_table's
    rendering of the table's own files)."""
    from benchmarks.tuning_table.build_table import markdown as cell_table

    read = {}
    for name in ("table.csv", "variants.csv"):
        with open(TABLES[table] / name, newline="") as f:
            read[name] = list(csv.DictReader(f))
    return [
        "The cells: starts (launch to ready, each launch's, with its compile cache) and per objective the mean ± sd "
        "over every repeat of every launch (range, count), from `table.csv` / `variants.csv`:",
        "",
        cell_table(read["table.csv"], read["variants.csv"]),
        "",
    ]


def markdown(
    tables: list[str],
    summaries: dict[str, list[dict[str, Any]]],
    infos: dict[str, dict[str, Any]],
    before: dict[str, list[dict[str, Any]]],
) -> str:
    out = [
        "# Replay study: servetune's tuning strategies against the tuning table",
        "",
        "Written by `.venv/bin/python -m benchmarks.tuning_table.replay` from each table's last run (its `Run:` line). "
        "Per run: `runs.csv`; per strategy and budget: `summary.csv` (under `replay/<table>/`).",
        "",
        "Columns: `spent` = GPU time the run charged (every launch, warm-up and repeat, the confirmation's "
        "included) in % of the grid's (every cell launched once and measured in three repeats); `regret` = the "
        "table's mean of the "
        "recommended cell against the best feasible cell's, in %; `≤2%` = share of seeds with regret ≤ 2%; "
        "`best/tie` = share recommending the grid's best or a cell tied with it by servetune's rule (inside the 95% "
        "interval of the two cells' measured repeats, compared repeat by repeat, or below 2%); `none` = share with no "
        "recommendation or an "
        "infeasible one; `inflation` = mean of the winner's first figure against its confirmed one (the winner's "
        "curse; + = the search's figure flattered it).",
        "",
        *([BEFORE, ""] if before else []),
        "The pruning simulator's calibration: `benchmarks/device_campaign/profiles/h200_qwen3.6-27b_vllm0.24.0.json`, "
        "fitted on the 2026-12-01 device campaign's H1 points (G_c8/G_c32/G_c64, decode_c1, prefill_16k: another "
        "session and other probes); no measurement of this table went into it.",
        "",
    ]
    for table in tables:
        rows = summaries[table]
        then = {(r["objective"], r["strategy"], float(r["budget"])): r for r in before.get(table, [])}
        out += [f"## {table}", "", LABELS[table], "", ran(infos[table]), ""]
        if table != "synthetic":
            out += cell_section(table)
        for objective, (probe, figure, goal) in OBJECTIVES.items():
            head = ["strategy", "budget", "spent % (max)", "regret % median", "p90", "≤2%", "best/tie", "none"]
            if then:
                head = [*head[:3], "before", *head[3:6], "before", "best/tie", "before", "none"]
            out += [
                f"### ({objective}) {goal} `fixed_load.{figure}` (table probe `{probe}`)",
                "",
                "| " + " | ".join([*head, "inflation % |"]),
                "|---|" + "---:|" * len(head),
            ]
            for r in (r for r in rows if r["objective"] == objective):
                old = then.get((objective, r["strategy"], float(r["budget"])))
                cells = [
                    r["strategy"],
                    f"{100 * r['budget']:.0f}%",
                    f"{r['spent_pct_mean']} ({r['spent_pct_max']})",
                    str(r["regret_pct_median"]),
                    str(r["regret_pct_p90"]),
                    f"{r['within_2pct']:.2f}",
                    f"{r['best_or_tied']:.2f}",
                    f"{r['infeasible_or_none']:.2f}",
                ]
                if then:
                    was = (
                        (
                            f"{float(old['spent_pct_mean']):.1f}",
                            f"{float(old['within_2pct']):.2f}",
                            f"{float(old['best_or_tied']):.2f}",
                        )
                        if old
                        else ("—", "—", "—")
                    )
                    cells = [*cells[:3], was[0], *cells[3:6], was[1], cells[6], was[2], cells[7]]
                out.append("| " + " | ".join([*cells, str(r["inflation_pct_mean"])]) + " |")
            out += ["", goal_line(rows, objective), ""]
    return "\n".join(out) + "\n"


def read_summary(path: Path) -> list[dict[str, Any]]:
    """A summary.csv as `summarize` gives it (numbers as numbers; empty cells stay empty)."""
    if not path.is_file():
        return []
    numeric = {"budget", "spent_pct_mean", "spent_pct_max", "within_2pct", "best_or_tied", "infeasible_or_none"}
    with open(path, newline="") as f:
        return [
            {k: float(v) if k in numeric else int(v) if k == "feasible_cells" else v for k, v in row.items()}
            for row in csv.DictReader(f)
        ]


def goal_line(rows: list[dict[str, Any]], objective: str) -> str:
    """The issue's bar: regret ≤ 2% at ≤ 25% of the grid's GPU time in ≥ 90% of seeds, by the best strategy."""
    mine = [r for r in rows if r["objective"] == objective]
    if mine and mine[0]["feasible_cells"] == 0:
        right = min(r["best_or_tied"] for r in mine)
        return (
            "No cell of this table meets the objective's SLO: the right answer is no recommendation, and every "
            f"strategy gave it in at least {right:.0%} of seeds (`best/tie` counts it); regret is undefined."
        )
    cheap = [
        r
        for r in rows
        if r["objective"] == objective and not r["strategy"].startswith("grid") and r["spent_pct_mean"] <= 25.0
    ]
    if not cheap:
        return (
            "Bar (≤ 2% regret at ≤ 25% of the grid's GPU time in ≥ 90% of seeds): no strategy spent ≤ 25% on average."
        )
    best = max(cheap, key=lambda r: r["within_2pct"])
    met = "met" if best["within_2pct"] >= 0.9 else "missed"
    return (
        f"Bar (≤ 2% regret at ≤ 25% of the grid's GPU time in ≥ 90% of seeds): {met}; the best strategy spending "
        f"≤ 25% on average is {best['strategy']} at a {100 * best['budget']:.0f}% budget, {best['within_2pct']:.0%} "
        f"of seeds within 2% (spent {best['spent_pct_mean']}% on average)."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default="measured,synthetic", help="measured, synthetic or both (comma-separated)")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "replay"), help="folder for runs.csv and summary.csv per table")
    ap.add_argument("--results", default=str(HERE / "RESULTS.md"), help="the markdown report ('' = under --out)")
    ap.add_argument(
        "--before",
        default="",
        help="another run's --out folder (the study before repeats were paired): its runs.csv per table, scored again "
        "by this study's rule, become summary_before.csv beside this run's and the report's `before` columns",
    )
    a = ap.parse_args()
    tables = [t for t in a.tables.split(",") if t]
    todo = jobs(tables, a.seeds)
    start, load = time.monotonic(), os.getloadavg()[0]
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(run, todo, chunksize=8))
    wall = time.monotonic() - start
    info = {
        "tables": a.tables,
        "seeds": a.seeds,
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": len(rows),
        "wall_s": wall,
        "workers": a.workers,
        "load": (load, os.getloadavg()[0]),
    }
    for table in tables:
        mine = [r for r in rows if r["table"] == table]
        write_csv(Path(a.out) / table / "runs.csv", mine)
        write_csv(Path(a.out) / table / "summary.csv", summarize(mine), SUMMARY_COLUMNS)
        (Path(a.out) / table / "info.json").write_text(json.dumps(info, indent=1) + "\n")
        if a.before and (old := Path(a.before) / table / "runs.csv").is_file():
            write_csv(Path(a.out) / table / "summary_before.csv", summarize(rescored(old, table)), SUMMARY_COLUMNS)
    shown = [t for t in TABLES if (Path(a.out) / t / "summary.csv").is_file()]
    summaries = {t: read_summary(Path(a.out) / t / "summary.csv") for t in shown}
    infos = {t: json.loads((Path(a.out) / t / "info.json").read_text()) for t in shown}
    before = {t: read_summary(Path(a.out) / t / "summary_before.csv") for t in shown}
    report = markdown(shown, summaries, infos, {t: rows for t, rows in before.items() if rows})
    (Path(a.results) if a.results else Path(a.out) / "RESULTS.md").write_text(report)
    print(f"{len(rows)} tunes replayed in {wall:.0f} s ({a.workers} workers); results under {a.out}")


if __name__ == "__main__":
    main()
