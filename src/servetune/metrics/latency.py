"""vLLM's per-request latency metrics by their names: the words of `--percentile-metrics` and of its result JSON
(`ttft`, `tpot`, `itl`, `e2el`). A module of its own so that a command's options (bench's) can name them without
loading the records they are computed from (`metrics/record.py`)."""

from __future__ import annotations

from typing import Literal

LatencyMetric = Literal["ttft", "tpot", "itl", "e2el"]
"""Time to first token, per output token, between tokens, end to end."""
PERCENTILE_METRICS: tuple[LatencyMetric, ...] = ("ttft", "tpot", "itl", "e2el")
"""The latency metrics vLLM reports percentiles of (`--percentile-metrics`); servetune writes all four unless
asked for fewer (vLLM's own default leaves e2el out)."""
