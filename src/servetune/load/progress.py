"""Live progress of a run: redrawn in place on a terminal, plain lines elsewhere (rich is imported here only, never
on the load path itself). Output that is not a terminal (a file, a pipe, CI's log) gets a line every
`PLAIN_EVERY_S` and a last one at the end, each ending with its newline: a line redrawn in place would run into
the summary's header there."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator

from servetune.load.shape import LoadShape
from servetune.metrics.record import RequestRecord

PLAIN_EVERY_S = 10.0


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

    from rich.console import Console
    from rich.text import Text

    console = Console()
    if not console.is_terminal:

        def line() -> None:
            console.print(Text.from_markup(render()).plain, markup=False, highlight=False, soft_wrap=True)

        plain = asyncio.ensure_future(_every(line, PLAIN_EVERY_S))
        try:
            yield
        finally:
            plain.cancel()
            line()
        return
    with Live(render(), console=console, refresh_per_second=2, transient=False) as live:
        task = asyncio.ensure_future(_every(lambda: live.update(render()), every_s))
        try:
            yield
        finally:
            task.cancel()
            live.update(render())


async def _every(say: Callable[[], None], every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        say()
