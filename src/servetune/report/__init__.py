"""report room: the writers of what a run leaves behind (never imported by tune).

Entry points: `files.write_outcome(exp, outcome)` (a tuning run's CSV/JSON/markdown/HTML),
`bench_files.write_bench_outputs` / `bench.write_bench_report` (bench), `rewrite.write_report` /
`rewrite.rewrite_reports` (`servetune report`, `args.ReportArgs`), the terminal's `terminal.outcome_lines` /
`decision_lines`, and `tune_run.run_tune`, `servetune tune` (a run ends in its reports).
"""
