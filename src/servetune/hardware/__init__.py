"""hardware room: `GPUSpec` (memory, bandwidth, TFLOP/s, compute capability, interconnect) in `CATALOG`,
`get_gpu` / `parse_gpu_arg` ("A100-80G-SXMx2" -> `GpuChoice`), custom GPUs (`custom_gpu`), and NVML detection
(`detect`, `read_devices` -> `DeviceReading`; `local_gpu` for `--gpu local`)."""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.hardware.catalog import (
        CATALOG as CATALOG,
    )
    from servetune.hardware.catalog import (
        GiB as GiB,
    )
    from servetune.hardware.catalog import (
        GPUSpec as GPUSpec,
    )
    from servetune.hardware.catalog import (
        custom_gpu as custom_gpu,
    )
    from servetune.hardware.catalog import (
        get_gpu as get_gpu,
    )
    from servetune.hardware.catalog import (
        gpu_names as gpu_names,
    )
    from servetune.hardware.gpus import GpuChoice as GpuChoice
    from servetune.hardware.gpus import local_gpu as local_gpu
    from servetune.hardware.gpus import parse_gpu_arg as parse_gpu_arg
    from servetune.hardware.nvml import DeviceReading as DeviceReading
    from servetune.hardware.nvml import detect as detect
    from servetune.hardware.nvml import read_devices as read_devices
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CATALOG": "catalog",
            "DeviceReading": "nvml",
            "GPUSpec": "catalog",
            "GiB": "catalog",
            "GpuChoice": "gpus",
            "custom_gpu": "catalog",
            "detect": "nvml",
            "get_gpu": "catalog",
            "gpu_names": "catalog",
            "local_gpu": "gpus",
            "parse_gpu_arg": "gpus",
            "read_devices": "nvml",
        },
    )
