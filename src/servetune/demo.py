"""The README's main job: the CPU tuning example on the tiny model, end to end, into one folder, with its
reports (above `report`, so it may write them).

Re-running it works: a folder that holds this very experiment is resumed (nothing finished is repeated; a
finished demo is only re-reported), a folder that holds something else is left alone and a fresh folder beside it
is used — and the first line says which.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from servetune.report.files import write_outcome
from servetune.tune.experiment import Experiment
from servetune.tune.loader import parse_experiment
from servetune.tune.loop import Outcome, fingerprint, run_experiment
from servetune.tune.progress import Emit
from servetune.tune.store import STORE_NAME, Store

EXAMPLE = "cpu-tiny.yaml"


def example_text() -> str:
    """The embedded copy of examples/tune/cpu-tiny.yaml (shipped inside the package)."""
    return resources.files("servetune.tune").joinpath("data", EXAMPLE).read_text()


def demo_experiment() -> Experiment:
    return parse_experiment(example_text(), EXAMPLE)


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


def run_demo(out_dir: Path, *, fresh: bool = False, emit: Emit = print) -> tuple[Outcome, dict[str, Path]]:
    """Runs the embedded CPU experiment (llama.cpp variants and one vLLM CPU variant on the tiny model) and
    writes summary.csv, results.json, summary.md, report.html and recommendation.txt."""
    exp = demo_experiment()
    folder, resume, decision = choose_folder(Path(out_dir), exp, fresh=fresh)
    emit(decision)
    outcome = run_experiment(exp, folder, resume=resume, emit=emit)
    return outcome, write_outcome(exp, outcome)
