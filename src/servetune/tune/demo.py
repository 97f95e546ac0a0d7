"""The README's main job: the CPU tuning example on the tiny model, end to end, into one folder."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from servetune.tune.progress import Emit
from servetune.tune.runner import Outcome, run_experiment

EXAMPLE = "cpu-tiny.yaml"


def example_text() -> str:
    """The embedded copy of examples/tune/cpu-tiny.yaml (shipped inside the package)."""
    return resources.files("servetune.tune").joinpath("data", EXAMPLE).read_text()


def run_demo(out_dir: Path, *, resume: bool = False, emit: Emit = print) -> Outcome:
    """Runs the embedded CPU experiment (llama.cpp variants and one vLLM CPU variant on the tiny model) and
    writes summary.csv, results.json, summary.md, report.html and recommendation.txt into `out_dir`."""
    from servetune.tune.loader import parse_experiment

    exp = parse_experiment(example_text(), EXAMPLE)
    return run_experiment(exp, Path(out_dir), resume=resume, emit=emit)
