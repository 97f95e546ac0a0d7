"""`Target`: the running server a probe measures, and how to talk to it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from servetune.suite.params import ClientSpec

Scrape = Callable[[], Awaitable[dict[str, float]]]
"""Reads the engine's /metrics as {name{labels}: value} (empty when the engine exposes none)."""


async def _no_metrics() -> dict[str, float]:
    return {}


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
