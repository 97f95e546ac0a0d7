"""metrics room: vLLM-named summaries (`summary.summarize`), SLOs and goodput, validity, exports, and
engine `/metrics` snapshots and deltas (`prometheus.scrape`, `prometheus.delta`). Formulas: docs/metrics.md."""
