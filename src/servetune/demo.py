"""The README's main job, end to end into one folder (above `report`, so it may write the reports):

1. seed 001's round 2 — Qwen3.6-27B on 2×A100 — tuned on servetune's simulator in process, in seconds
   (`tune.virtual`): every figure of it is simulated, and the summary says so and with which calibration;
2. the embedded CPU experiment tuned on real llama.cpp engines with the tiny model, in about three minutes: slots
   and continuous batching under a load that queues a single slot, judged by a TTFT SLO that some variants miss;
3. a summary that fits one screen: what was tuned, the decision against the baseline with its interval (the
   ranking's own rule, `tune.stats.Delta.significant`), the trade-offs, the command and where the reports are.

Re-running it works: a folder that holds this very experiment is resumed (nothing finished is repeated; a
finished demo is only re-reported), a folder that holds something else is left alone and a fresh folder beside it
is used — and the first line (and the summary's last) says which.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from servetune.demo_args import DemoArgs
from servetune.report.files import write_outcome
from servetune.report.terminal import (
    command_lines,
    decision_lines,
    experiment_lines,
    ranking_lines,
    terminal_width,
    tradeoff_lines,
    wrap,
)
from servetune.tune.execution.session import default_launcher
from servetune.tune.execution.virtual import calibration_source, virtual_launcher
from servetune.tune.loop import Outcome, fingerprint, run_experiment
from servetune.tune.results.progress import Emit, stopwatch
from servetune.tune.results.store import STORE_NAME, Store
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.loader import parse_experiment

EXAMPLE = "cpu-tiny.yaml"
SIM_EXAMPLE = "qwen36-27b-2xa100-sim.yaml"
SIM_FOLDER = "seed-001-sim"
"""The simulated part's folder, inside the demo's."""


def example_text(name: str = EXAMPLE) -> str:
    """The embedded copy of examples/tune/NAME (shipped inside the package, so an installed servetune has it)."""
    return resources.files("servetune.tune").joinpath("data", name).read_text()


def demo_experiment() -> Experiment:
    return parse_experiment(example_text(), EXAMPLE)


def sim_experiment() -> Experiment:
    return parse_experiment(example_text(SIM_EXAMPLE), SIM_EXAMPLE)


def choose_folder(out_dir: Path, exp: Experiment, *, fresh: bool = False) -> tuple[Path, bool, str]:
    """(folder, resume?, what was decided, in words)."""
    store_path = out_dir / STORE_NAME
    if not store_path.exists():
        return out_dir, False, f"starting fresh in {out_dir}"
    store = Store(store_path, readonly=True)
    try:
        same = store.meta("experiment_fingerprint") == fingerprint(exp)
        done = sum(1 for r in store.records() if r.status in ("done", "failed", "skipped"))
    finally:
        store.close()
    if same and not fresh:
        return out_dir, True, f"resuming {out_dir}: {done} variant(s) already finished are kept, not repeated"
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    new = out_dir.with_name(f"{out_dir.name}-{stamp}")
    why = "--fresh was given" if same else f"{out_dir} holds another experiment"
    return new, False, f"starting fresh in {new} ({why}; {out_dir} is left as it is)"


@dataclass(frozen=True)
class Part:
    """One tuned experiment of the demo: what ran, its outcome, the files written, and how long it took."""

    experiment: Experiment
    outcome: Outcome
    files: dict[str, Path]
    wall_s: float


@dataclass(frozen=True)
class DemoRun:
    folder: Path
    started: str
    """Whether it resumed or started fresh, and where (choose_folder's words)."""
    simulated: Part
    tuned: Part


def run_demo(out_dir: Path, *, fresh: bool = False, emit: Emit = print, width: int = 100) -> DemoRun:
    """Runs (or resumes) both parts into `out_dir` and writes their reports (summary.csv, results.json,
    summary.md, report.html, recommendation.txt); the simulated part's summary is emitted as soon as it is known.
    Engine startup lines are not shown (a failure is still reported, with its proof, in the summary)."""
    exp = demo_experiment()
    folder, resume, started = choose_folder(Path(out_dir), exp, fresh=fresh)
    emit(started)
    emit(f"simulating seed 001's round 2 on servetune's simulator, in process, into {folder / SIM_FOLDER} ...")
    simulated = simulate(folder / SIM_FOLDER)
    for line in simulated_lines(simulated, width):
        emit(line)
    emit(f"tuning {exp.name} on real llama.cpp engines into {folder} (about three minutes) ...")
    clock = stopwatch()
    outcome = run_experiment(exp, folder, resume=resume, emit=emit, launcher=default_launcher(lambda _: None))
    return DemoRun(folder, started, simulated, Part(exp, outcome, write_outcome(exp, outcome), clock()))


def simulate(folder: Path) -> Part:
    """Seed 001's round 2 on the simulator in process, into `folder` (resumed when it holds this very experiment,
    beside it when it holds another)."""
    sim = sim_experiment()
    folder, resume, _ = choose_folder(folder, sim)
    clock = stopwatch()
    outcome = run_experiment(sim, folder, resume=resume, emit=lambda _: None, launcher=virtual_launcher(sim))
    return Part(sim, outcome, write_outcome(sim, outcome), clock())


def simulated_lines(part: Part, width: int) -> list[str]:
    """The simulated part in a few lines, saying plainly that its figures are the simulator's and how it was
    calibrated."""
    exp, ranking = part.experiment, part.outcome.ranking
    choice = exp.hardware.resolved()
    gpu = f"{choice.count}×{choice.gpu.name}" if choice else "no GPU"
    profile = calibration_source(exp)
    calibration = f"calibrated with {profile}" if profile else "uncalibrated roofline: no profile for this GPU"
    seconds = sum(r.wall_s or 0.0 for r in part.outcome.records)
    head = (
        f"SIMULATED, not measured — seed 001's round 2: {exp.engine.model} on {gpu}, vLLM {exp.engine.version}, "
        f"{len(ranking.entries)} variants on servetune's simulator in {seconds:.0f} s ({calibration})."
    )
    lines = wrap(head, width, "", "  ") + (decision_lines(ranking, width, "Simulated") or wrap(ranking.reason, width))
    html = part.files.get("html")
    return lines + (wrap(f"  report: {html}", width, whole_words=True) if html else [])


def summary_lines(run: DemoRun, width: int = 100) -> list[str]:
    """The one-screen summary (about 40 lines at 100 columns): the tuned decision first, the simulated one after."""
    part = run.tuned
    ranking, files = part.outcome.ranking, part.files
    decision = decision_lines(ranking, width)
    title = "── servetune demo: the decision "
    lines = [title + "─" * max(0, width - len(title))]
    lines += experiment_lines(part.experiment, ranking, width)
    lines += decision or wrap(ranking.reason, width)
    lines += ranking_lines(ranking, width)
    if decision and ranking.entries and ranking.entries[0] is not ranking.winner:  # a tie-break picked the winner
        lines += wrap(f"Why: {ranking.reason}.", width, "", "  ")
    lines += tradeoff_lines(ranking, width, limit=2, per_variant=1)
    lines += command_lines(files, width)
    html = files.get("html")
    if html is not None:
        where = f"Report: {html} (summary.csv, results.json, recommendation.txt beside it)"
        lines += wrap(where, width, whole_words=True)
    lines += ["", *simulated_lines(run.simulated, width)]
    took = part.wall_s + run.simulated.wall_s
    again = (
        f"This run: {run.started} ({took / 60:.1f} min). Again: `servetune demo` resumes {run.folder}, nothing "
        "finished is repeated; `--fresh` starts over beside it."
    )
    return [*lines, "", *wrap(again, width, whole_words=True)]


def run_demo_command(args: DemoArgs) -> int:
    """`servetune demo`: the seed plans, then (unless `--plan-only`) both tuning parts and the one-screen summary;
    the exit code (130 when interrupted: the finished runs are kept, and a second run resumes them)."""
    from rich.console import Console

    from servetune.plan.demo import run_demo as plan_seeds

    plan_seeds()
    if args.plan_only:
        return 0
    console = Console(stderr=True, width=terminal_width())
    try:
        run = run_demo(
            args.out,
            fresh=args.fresh,
            emit=lambda line: console.print(line, markup=False, highlight=False),
            width=console.width,
        )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: finished runs are kept in {args.out}; `servetune demo` again resumes them", file=sys.stderr
        )
        return 130
    for line in summary_lines(run, console.width):
        print(line)
    return 0
