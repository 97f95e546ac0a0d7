"""metrics room: vLLM-named summaries (`summary.summarize`), SLOs and goodput, validity, exports (servetune's files and
vLLM's result JSON, `vllm_format`), engine `/metrics` snapshots and deltas (`prometheus.scrape`, `prometheus.delta`),
bench folders of measured runs (`runs`) and other tools' result files read into them (`imports`); the request record
every figure is computed from (`record.RequestRecord`). Formulas: docs/metrics.md."""
