"""What `servetune tune` does with its arguments (`tune/schema/args.py` `TuneArgs`): read the experiment, then
either print its plan (`--check`: nothing launches) or run it (`tune.loop.run_experiment`), write its reports and
print the ranking. The exit code says whether any variant succeeded; Ctrl-C keeps every finished run and writes
their reports. The report room holds it because a run ends in its reports."""

from __future__ import annotations

import contextlib
import json
import sys

from rich.console import Console

from servetune.errors import ServetuneError
from servetune.report.files import write_outcome
from servetune.report.rewrite import rewrite_reports
from servetune.report.terminal import outcome_lines
from servetune.tune.loop import default_feasibility, run_experiment
from servetune.tune.schema.args import TuneArgs
from servetune.tune.schema.loader import load_experiment, with_executor
from servetune.tune.search.estimates import predictor
from servetune.tune.search.plan import plan_experiment

EXIT_INTERRUPTED = 130


def run_tune(args: TuneArgs) -> int:
    """`servetune tune`: the exit code (1 when no variant succeeded)."""
    exp = with_executor(
        load_experiment(args.experiment),
        kind=args.executor,
        gpus=args.gpus,
        address=args.ray_address,
        resource=args.ray_resource,
    )
    folder = args.folder(exp.name)
    if args.check:
        plan = plan_experiment(
            exp,
            feasibility=default_feasibility(exp),
            predictor=predictor(exp) if exp.estimate.mode != "off" else None,
        )
        print(json.dumps(plan.to_json(), indent=2) if args.as_json else "\n".join(plan.lines()))
        return 0
    console = Console(stderr=True)
    try:
        outcome = run_experiment(
            exp,
            folder,
            resume=args.resume,
            retry_failed=args.retry_failed,
            emit=lambda line: console.print(line, markup=False, highlight=False),
        )
    except KeyboardInterrupt:
        written = ""
        with contextlib.suppress(ServetuneError, OSError, KeyError):  # the finished runs' reports, readable at once
            written = f" (reports of the finished runs: {rewrite_reports(folder)['html']})"
        print(
            f"\ninterrupted: every finished run is kept in {folder}{written}; continue with "
            f"`servetune tune {args.experiment} --out {folder} --resume`",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    for line in outcome_lines(outcome.ranking, write_outcome(exp, outcome)):
        print(line)
    failed = outcome.nothing_succeeded()
    if failed:
        Console(stderr=True, soft_wrap=True).print(f"tune: {failed}", style="red", markup=False, highlight=False)
        return 1
    return 0
