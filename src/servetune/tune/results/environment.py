"""The environment a run happened in (recorded in results.json and the report): machine, Python,
servetune and engine versions, GPUs seen through NVML."""

from __future__ import annotations

import os
import platform
from typing import Any


def environment(engine_versions: dict[str, str | None] | None = None) -> dict[str, Any]:
    import servetune
    from servetune.hardware.nvml import detect

    gpus = detect()
    env: dict[str, Any] = {
        "servetune": servetune.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpus": ", ".join(f"{name} ({mem / 2**30:.0f} GiB)" for name, mem in gpus) or "none (NVML saw no GPU)",
    }
    for engine, version in (engine_versions or {}).items():
        env[f"{engine}_version"] = version or "unknown"
    return env


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        return None
    return None
