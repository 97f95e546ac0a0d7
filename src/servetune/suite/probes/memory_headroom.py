"""B5: memory left per GPU (NVML), the smallest across GPUs; without a GPU, the host's available memory and the
engine's KV-cache usage. Real hardware only: the simulator has no memory to read."""

from __future__ import annotations

import psutil

from servetune.hardware.nvml import read_devices
from servetune.suite.probes._common import Params
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure, ProbeContext, ProbeSpec, register


class MemoryHeadroom(Params):
    pass


async def run(ctx: ProbeContext, p: MemoryHeadroom) -> ProbeResult:
    snapshot = await ctx.backend.scrape()
    kv_usage = snapshot.get("kv_cache_usage") if snapshot is not None else None
    figures: dict[str, float | None] = {"kv_cache_usage_pct": 100 * kv_usage if kv_usage is not None else None}
    gpus = read_devices() if ctx.backend.gpu_count else []
    if gpus:
        free = [d.total_bytes - d.used_bytes for d in gpus]
        figures["headroom_mib"] = min(free) / 2**20
        figures["headroom_pct"] = min(100 * f / d.total_bytes for f, d in zip(free, gpus, strict=True))
        notes = [f"NVML, {len(gpus)} GPU(s)"]
    else:
        memory = psutil.virtual_memory()
        figures["headroom_mib"] = memory.available / 2**20
        figures["headroom_pct"] = 100 * memory.available / memory.total
        notes = ["no GPU: host memory (available / total)"]
    return ProbeResult(probe="memory_headroom", figures=figures, notes=notes)


SPEC = register(
    ProbeSpec(
        name="memory_headroom",
        order=60,
        params=MemoryHeadroom,
        run=run,
        summary=__doc__.splitlines()[0],
        figures=(
            Figure(
                name="headroom_pct",
                unit="%",
                better="higher",
                label="memory headroom",
                headline=True,
                slo="memory_headroom_pct",
            ),
            Figure(name="headroom_mib", unit="MiB", better="higher", label="memory headroom"),
            Figure(name="kv_cache_usage_pct", unit="%", better="none", label="KV-cache usage"),
        ),
        simulable=False,
    )
)
