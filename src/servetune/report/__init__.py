"""report room: the writers of what a run leaves behind (called by the CLI, never imported by tune).

Entry points: `write_outcome(exp, outcome)` (a tuning run's CSV/JSON/markdown/HTML), `write_bench_outputs` /
`write_bench_report` (bench), `write_report` / `rewrite_reports` (`servetune report`), and the terminal's
`outcome_lines` / `decision_lines`.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.report.bench import render_bench_html as render_bench_html, write_bench_report as write_bench_report
    from servetune.report.bench_files import bench_runs as bench_runs, write_bench_outputs as write_bench_outputs
    from servetune.report.files import write_outcome as write_outcome, write_reports as write_reports
    from servetune.report.html import render_html as render_html
    from servetune.report.rewrite import rewrite_reports as rewrite_reports, write_report as write_report
    from servetune.report.tables import TradeOff as TradeOff, tradeoffs as tradeoffs
    from servetune.report.terminal import (
        command_lines as command_lines,
        decision_lines as decision_lines,
        experiment_lines as experiment_lines,
        outcome_lines as outcome_lines,
        ranking_lines as ranking_lines,
        terminal_width as terminal_width,
        tradeoff_lines as tradeoff_lines,
        wrap as wrap,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "TradeOff": "tables",
            "bench_runs": "bench_files",
            "command_lines": "terminal",
            "decision_lines": "terminal",
            "experiment_lines": "terminal",
            "outcome_lines": "terminal",
            "ranking_lines": "terminal",
            "render_bench_html": "bench",
            "render_html": "html",
            "rewrite_reports": "rewrite",
            "terminal_width": "terminal",
            "tradeoff_lines": "terminal",
            "tradeoffs": "tables",
            "wrap": "terminal",
            "write_bench_outputs": "bench_files",
            "write_bench_report": "bench",
            "write_outcome": "files",
            "write_report": "rewrite",
            "write_reports": "files",
        },
    )
