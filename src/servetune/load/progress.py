"""Live progress of a run in the terminal (rich is imported here only, never on the load path itself)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from servetune.load.shape import LoadShape
from servetune.metrics.record import RequestRecord

if TYPE_CHECKING:
    from rich.live import Live


@contextlib.contextmanager
def live_progress(records: list[RequestRecord], shape: LoadShape, every_s: float = 0.5) -> Iterator[None]:
    """Shows done / failed / req/s / output tok/s / p50 TTFT of the measured requests, refreshed twice a second."""
    from rich.live import Live

    start = time.monotonic()
    bound = " ".join(
        x
        for x in (
            f"{shape.requests} requests" if shape.requests else "",
            f"{shape.duration_s:g} s" if shape.duration_s else "",
        )
        if x
    )
    level = f"concurrency {shape.concurrency}" if shape.kind == "concurrency" else f"rate {shape.rate:g}/s"

    def render() -> str:
        measured = [r for r in records if r.phase == "measure"]
        ok = [r for r in measured if r.ok]
        elapsed = max(time.monotonic() - start, 1e-9)
        ttfts = sorted((r.chunk_ns[0] - r.sent_ns) / 1e6 for r in ok[-500:] if r.chunk_ns)
        p50 = f"{ttfts[len(ttfts) // 2]:.1f} ms" if ttfts else "-"
        warm = sum(r.phase == "warmup" for r in records)
        return (
            f"[bold]{level}[/bold] ({bound})  {elapsed:6.1f} s  warm-up {warm}  done {len(ok)}  "
            f"[red]failed {len(measured) - len(ok)}[/red]  {len(ok) / elapsed:.2f} req/s  "
            f"{sum(r.output_tokens for r in ok) / elapsed:.0f} out tok/s  TTFT p50 {p50}"
        )

    with Live(render(), refresh_per_second=2, transient=False) as live:
        task = asyncio.ensure_future(_refresh(live, render, every_s))
        try:
            yield
        finally:
            task.cancel()
            live.update(render())


async def _refresh(live: Live, render: Callable[[], Any], every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        live.update(render())
