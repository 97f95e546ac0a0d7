"""`Target`: the running server a probe measures, and how to talk to it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servetune.suite.params import ClientSpec

if TYPE_CHECKING:
    from servetune.metrics.prometheus import MetricsSnapshot

Scrape = Callable[[], Awaitable["MetricsSnapshot | None"]]
"""Reads the engine's /metrics (None when the engine exposes none)."""


async def _no_metrics() -> MetricsSnapshot | None:
    return None


@dataclass(frozen=True)
class Target:
    """A ready server plus the client settings and limits the probes need."""

    base_url: str
    model: str
    client: ClientSpec = field(default_factory=ClientSpec)
    sampling: dict[str, Any] = field(default_factory=dict)  # the sampling preset, merged into each body
    max_model_len: int | None = None
    tokenizer: str | None = None
    slos: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    gpu_count: int = 0
    engine: str = "vllm"
    facts: dict[str, Any] = field(default_factory=dict)
    scrape: Scrape = _no_metrics

    def body(self, **extra: Any) -> dict[str, Any]:
        """Extra request-body fields: sampling preset, then the client's extra_body, then the probe's own."""
        return {**self.sampling, **self.client.extra_body, **extra}
