"""Local GPUs through NVML when `pynvml` (package nvidia-ml-py) is installed; never required.

NVML gives the name and the memory; bandwidth and TFLOP/s come from the catalog entry the name matches
(`match_catalog`). `hardware.gpus` turns `--gpu local` into a catalog GPU and a count.
"""

from __future__ import annotations

from typing import NamedTuple

from servetune.hardware.catalog import CATALOG, GPUSpec

_NAME_HINTS = (
    ("h200 nvl", "H200-NVL"),
    ("h200", "H200"),
    ("h100 nvl", "H100-NVL"),
    ("h100 pcie", "H100-PCIe"),
    ("h100", "H100-SXM"),
    ("a100-pcie-40", "A100-40G-PCIe"),
    ("a100-sxm4-40", "A100-40G-SXM"),
    ("a100 80gb pcie", "A100-80G-PCIe"),
    ("a100-pcie-80", "A100-80G-PCIe"),
    ("a100", "A100-80G-SXM"),
    ("v100s", "V100S-32G"),
    ("v100-pcie-32", "V100-32G-PCIe"),
    ("v100-sxm2-16", "V100-16G"),
    ("v100", "V100-32G"),
    ("a10g", "A10G"),
    ("a10", "A10"),
    ("l40s", "L40S"),
    ("l4", "L4"),
    ("4090", "RTX-4090"),
    ("3090", "RTX-3090"),
)


def match_catalog(device_name: str, memory_bytes: int | None = None) -> GPUSpec | None:
    """The catalog entry for an NVML/CUDA device name such as 'NVIDIA A100-SXM4-80GB', with its real memory."""
    lowered = device_name.lower()
    for hint, name in _NAME_HINTS:
        if hint in lowered:
            gpu = next(g for g in CATALOG if g.name == name)
            if memory_bytes:
                gpu = gpu.model_copy(update={"memory_bytes": memory_bytes, "source": f"nvml ({device_name})"})
            return gpu
    return None


class DeviceReading(NamedTuple):
    """One local GPU as NVML sees it now."""

    name: str
    used_bytes: int
    total_bytes: int


def read_devices() -> list[DeviceReading]:
    """Name and memory of each local GPU; empty without pynvml or without a GPU."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVML raises its own error types when no driver is present
        return []
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
            found.append(
                DeviceReading(name.decode() if isinstance(name, bytes) else str(name), int(info.used), int(info.total))
            )
        return found
    finally:
        pynvml.nvmlShutdown()


def detect() -> list[tuple[str, int]]:
    """(name, total memory bytes) of each local GPU; empty without pynvml or without a GPU."""
    return [(d.name, d.total_bytes) for d in read_devices()]
