"""metrics room: what a run's requests measure, from the `RequestRecord` of each (formulas: docs/metrics.md).

Entry points: `record.RequestRecord`, `summary.summarize(records) -> Summary`, SLOs (`slo.Slos`,
`slo.slo_problem`), validity (`validity.check_validity`, `validity.run_problems`), engine `/metrics`
(`prometheus.scrape` -> `MetricsSnapshot`, `prometheus.delta`), bench runs (`runs.write_run`, `runs.read_run`,
`imports.read_runs`) and vLLM's result JSON (`vllm_format.vllm_result`, `vllm_format.records_from_vllm`).
"""
