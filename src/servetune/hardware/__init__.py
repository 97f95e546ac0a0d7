"""hardware room: the GPUs servetune knows and the ones it finds.

Entry points: `parse_gpu_arg("A100-80G-SXMx2") -> GpuChoice`, `get_gpu(name) -> GPUSpec` from `CATALOG`,
`custom_gpu`, and NVML detection (`detect`, `read_devices`, `local_gpu`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.hardware.catalog import (
        CATALOG as CATALOG,
        GiB as GiB,
        GPUSpec as GPUSpec,
        custom_gpu as custom_gpu,
        get_gpu as get_gpu,
        gpu_names as gpu_names,
    )
    from servetune.hardware.gpus import GpuChoice as GpuChoice, local_gpu as local_gpu, parse_gpu_arg as parse_gpu_arg
    from servetune.hardware.nvml import DeviceReading as DeviceReading, detect as detect, read_devices as read_devices
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
