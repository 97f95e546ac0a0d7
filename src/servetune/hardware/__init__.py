"""hardware room: the GPUs servetune knows and the ones it finds.

Entry points: `gpus.parse_gpu_arg("A100-80G-SXMx2") -> GpuChoice`, `catalog.get_gpu(name) -> GPUSpec` from
`catalog.CATALOG`, `catalog.custom_gpu`, and NVML detection (`nvml.detect`, `nvml.read_devices`, `gpus.local_gpu`).
"""
