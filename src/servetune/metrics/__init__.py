"""metrics room: vLLM-named summaries (`summary.summarize`), SLOs and goodput, validity, exports, and
engine `/metrics` snapshots and deltas (`prometheus.scrape`, `prometheus.delta`); the request record every figure is computed from
(`record.RequestRecord`). Formulas: docs/metrics.md."""
