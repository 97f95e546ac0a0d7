"""How stable is the demo's verdict? Runs the README's first command (`servetune demo`) fresh, N times, each in
an empty folder as on a fresh clone, and writes what each run decided: the winner, the baseline, the objective of
both with their 95% intervals, the margin with its interval and whether the ranking's rule
(`tune.stats.Delta.significant`, read from the run's results.json) calls it outside the noise — with the machine's
load average before, during (sampled every 5 s) and after each run, since the differences must survive a busy
machine.

    python benchmarks/demo_stability/run.py            # five runs (about 17 minutes on 2 cores)
    python benchmarks/demo_stability/run.py --runs 1   # one, to try it

Writes results.json and RESULTS.md beside this file (and each run's terminal summary under summaries/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OBJECTIVE = "load_curve.slo_max_concurrency"
SUMMARY_TITLE = "── servetune demo: the decision"


@contextmanager
def load_sampler(period_s: float = 5.0) -> Iterator[list[float]]:
    """The 1-minute load average, sampled every `period_s` while the block runs."""
    samples: list[float] = [os.getloadavg()[0]]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(period_s):
            samples.append(os.getloadavg()[0])

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()
        samples.append(os.getloadavg()[0])


def one_run(index: int) -> dict[str, Any]:
    """`servetune demo` in a fresh empty folder; what it decided, how long it took, how loaded the machine was."""
    with tempfile.TemporaryDirectory(prefix=f"demo-stability-{index}-") as tmp:
        start = time.monotonic()
        with load_sampler() as load:
            proc = subprocess.run(
                [sys.executable, "-m", "servetune", "demo"], cwd=tmp, capture_output=True, text=True, timeout=1800
            )
        wall = time.monotonic() - start
        folder = Path(tmp) / "runs" / "demo"
        start_of_summary = proc.stdout.find(SUMMARY_TITLE)  # stdout holds the plan table first
        summary = proc.stdout[start_of_summary:] if start_of_summary >= 0 else proc.stdout
        (HERE / "summaries").mkdir(exist_ok=True)
        (HERE / "summaries" / f"run-{index}.txt").write_text(summary)
        row: dict[str, Any] = {
            "run": index,
            "exit_code": proc.returncode,
            "wall_s": round(wall, 1),
            "load_1min": {"start": load[0], "mean": round(sum(load) / len(load), 2), "max": max(load), "end": load[-1]},
            "summary_lines": len(summary.rstrip("\n").splitlines()),
            "summary_width": max((len(line) for line in summary.splitlines()), default=0),
        }
        if proc.returncode != 0 or not (folder / "results.json").exists():
            row["error"] = (proc.stderr or proc.stdout)[-2000:]
            return row
        row.update(decision(json.loads((folder / "results.json").read_text())))
        sim = folder / "seed-001-sim" / "results.json"
        if sim.exists():
            data = json.loads(sim.read_text())
            row["simulated_winner"] = data["winner"]
        return row


def decision(data: dict[str, Any]) -> dict[str, Any]:
    """The verdict of one run, as its results.json states it (the ranking's figures and rule, not recomputed)."""
    variants = {v["name"]: v for v in data["variants"]}
    base = next(v for v in data["variants"] if v["baseline"])
    winner = variants.get(data["winner"] or "")

    def objective(v: dict[str, Any]) -> dict[str, Any] | None:
        fig = v["figures"].get(OBJECTIVE)
        return None if fig is None else {"mean": fig["mean"], "ci95": fig["ci95"], "n": fig["n"]}

    out: dict[str, Any] = {
        "winner": data["winner"],
        "baseline": base["name"],
        "reason": data["reason"],
        "objective": {name: objective(v) for name, v in variants.items()},
        "status": {name: v["status"] + (" (misses SLOs)" if v["slo_failures"] else "") for name, v in variants.items()},
    }
    margin = winner["deltas_pct"].get(OBJECTIVE) if winner and winner is not base else None
    out["margin"] = margin
    out["outside_noise"] = bool(margin and margin["significant"])
    return out


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    decided = sum(1 for r in rows if r.get("outside_noise"))
    winners: dict[str, int] = {}
    for r in rows:
        winners[str(r.get("winner"))] = winners.get(str(r.get("winner")), 0) + 1
    lines = [
        "# The demo's verdict over fresh runs",
        "",
        f"`{meta['command']}` run {len(rows)} times, each in an empty folder (as on a fresh clone), on "
        f"{meta['cpus']} CPU cores ({meta['platform']}), {meta['date']}, commit {meta['commit']}. "
        "Written by `python benchmarks/demo_stability/run.py`.",
        "",
        f"**{decided} of {len(rows)} runs decided outside the noise** (the winner is not the baseline and "
        "`Delta.significant` holds for its margin over the baseline, as the run's results.json states it); winners: "
        + ", ".join(f"{name} {count}/{len(rows)}" for name, count in sorted(winners.items()))
        + ".",
        "",
        "| run | wall | load avg 1 min: start / mean / max / end | winner | objective (winner vs baseline) "
        "| margin ± 95% | outside the noise | summary lines × columns |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        load = r["load_1min"]
        loads = f"{load['start']:.2f} / {load['mean']:.2f} / {load['max']:.2f} / {load['end']:.2f}"
        if "error" in r:
            lines.append(f"| {r['run']} | {r['wall_s']:.0f} s | {loads} | failed (exit {r['exit_code']}) | | | no | |")
            continue
        obj = r["objective"]
        win, base = obj.get(r["winner"]) if r["winner"] else None, obj.get(r["baseline"])

        def fmt(o: dict[str, Any] | None) -> str:
            return "—" if o is None else f"{o['mean']:.2f} ± {o['ci95'] or 0:.2f}"

        margin = r["margin"]
        m = "—" if not margin else f"{margin['pct']:+.0f}% ± {margin['ci95'] or 0:.0f}%"
        lines.append(
            f"| {r['run']} | {r['wall_s'] / 60:.1f} min | {loads} | {r['winner']} | {fmt(win)} vs {fmt(base)} "
            f"({r['baseline']}) | {m} | {'yes' if r['outside_noise'] else 'no'} | "
            f"{r['summary_lines']} × {r['summary_width']} |"
        )
    lines += [
        "",
        "Objective: `load_curve.slo_max_concurrency`, the most concurrent users (2, 4 or 8 tested) whose TTFT p99 "
        "stays within 100 ms; mean ± 95% half-width over 5 repeats. Per-variant figures: results.json; each run's "
        "terminal summary: summaries/.",
        "",
        meta["note"],
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--note",
        default="Other sessions' work shared the machine while these ran (see the load averages: the demo "
        "alone keeps about 1.5 of the 2 cores busy); the verdict held on a busy machine.",
        help="What to say about the machine (e.g. that it was quiet).",
    )
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    meta = {
        "command": "servetune demo",
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit.stdout.strip() or "unknown",
        "note": args.note,
    }
    rows = []
    for i in range(1, args.runs + 1):
        row = one_run(i)
        rows.append(row)
        print(
            f"run {i}: {row.get('winner')} outside the noise={row.get('outside_noise')} margin={row.get('margin')} "
            f"load={row['load_1min']} wall={row['wall_s']} s",
            flush=True,
        )
    (HERE / "results.json").write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    (HERE / "RESULTS.md").write_text(markdown(rows, meta))
    print(f"wrote {HERE / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
