"""report room: the writers of what a run leaves behind (called by the CLI, never imported by tune).

Entry points: `files.write_outcome(exp, outcome)` (a tuning run's CSV/JSON/markdown/HTML),
`bench_files.write_bench_outputs` / `bench.write_bench_report` (bench), `rewrite.write_report` /
`rewrite.rewrite_reports` (`servetune report`), and the terminal's `terminal.outcome_lines` / `decision_lines`.
"""
