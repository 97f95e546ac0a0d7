"""`servetune demo`: the README's main job on an embedded default, with nothing to download; its options are
`demo_args.py` `DemoArgs`, and `demo.py` `run_demo_command` runs it.

It shows the whole flow on this machine: the planner's verdicts for the five field-report systems, seed 001's
round 2 tuned on the simulator (seconds, every figure simulated), then a real tuning experiment (llama.cpp on a
tiny model servetune builds itself) ending in a one-screen summary; the reports are written under `--out`.
"""

from __future__ import annotations

import typer

from servetune.cli.model_options import model_options
from servetune.demo_args import DemoArgs


def demo(args: DemoArgs) -> None:
    """Plan the five seed systems, tune seed 001's round 2 on the simulator, then tune the embedded CPU experiment
    end to end on real engines (a second run resumes the first, or starts fresh beside it: it says which)."""
    from servetune.demo import run_demo_command

    raise typer.Exit(run_demo_command(args))


def register(app: typer.Typer) -> None:
    """Adds `demo`."""
    app.command("demo")(model_options(DemoArgs)(demo))
