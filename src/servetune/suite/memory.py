"""Memory readings for the headroom probe: per-GPU used/total through NVML, host memory from /proc."""

from __future__ import annotations


def gpu_memory() -> list[tuple[int, int]]:
    """(used, total) bytes per local GPU; empty without pynvml or without a GPU."""
    from servetune.hardware.nvml import read_devices

    return [(d.used_bytes, d.total_bytes) for d in read_devices()]


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory (MemAvailable counts reclaimable cache as free)."""
    values: dict[str, int] = {}
    with open("/proc/meminfo") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            if name in {"MemAvailable", "MemTotal"}:
                values[name] = int(rest.split()[0]) * 1024
    return values["MemAvailable"], values["MemTotal"]
