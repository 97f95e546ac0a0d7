"""hardware room: `catalog.GPUSpec` (memory, bandwidth, TFLOP/s, compute capability, interconnect),
`catalog.get_gpu` / `catalog.parse_gpu_arg` ("A100-80G-SXMx2"), custom GPUs, and NVML detection (`nvml`)."""
