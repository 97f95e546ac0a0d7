"""Memory readings for the headroom probe: per-GPU used/total through NVML, host memory from /proc."""

from __future__ import annotations


def gpu_memory() -> list[tuple[int, int]]:
    """(used, total) bytes per local GPU; empty without pynvml or without a GPU."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVML has its own error types when no driver is present
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i))
            out.append((int(info.used), int(info.total)))
        return out
    finally:
        pynvml.nvmlShutdown()


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory (MemAvailable counts reclaimable cache as free)."""
    values: dict[str, int] = {}
    with open("/proc/meminfo") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            if name in {"MemAvailable", "MemTotal"}:
                values[name] = int(rest.split()[0]) * 1024
    return values["MemAvailable"], values["MemTotal"]
