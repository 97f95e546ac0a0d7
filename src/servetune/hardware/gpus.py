"""`--gpu NAME[xN]`: the one reading of a GPU argument, shared by every command (plan, estimate, sim-serve,
tune's `hardware.gpu`).

`A100-80G-SXMx2`, `2xH100-SXM`, `L40S*8`, `H200`, `local` (NVML: the local model and how many),
`custom:mem=48,bw=864,tflops=362,cc=8.9` (optionally `x2`). A family name that stands for GPUs of different
memory (`A100`, `V100`, `H100`) is an error listing the exact models, never a silent guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servetune.errors import ServetuneError
from servetune.hardware.catalog import GPUSpec, get_gpu, is_known, parse_custom
from servetune.hardware.nvml import match_catalog, read_devices

MAX_GPUS = 4096
"""A sanity bound on N in `NAMExN` (a typo such as `H200x88888` is an error, not a plan)."""

_PREFIX = re.compile(r"^(\d+)\s*[x×*]\s*(.+)$", re.IGNORECASE)
_SUFFIX = re.compile(r"^(.+?)\s*[x×*]\s*(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class GpuChoice:
    """What a `--gpu` argument says: the model, how many, and whether the count was said (`x2`, `x1`, `local`'s
    devices) or only implied (`H200`: as many as the engine's parallelism asks for, `plan.placement`)."""

    gpu: GPUSpec
    count: int
    counted: bool


def parse_gpu_arg(text: str) -> GpuChoice:
    """The GPU model and count a `--gpu` argument names (see the module docstring for the forms)."""
    raw, count, counted = str(text).strip(), 1, False
    if not raw:
        raise ServetuneError("--gpu is empty", "name a GPU, e.g. --gpu H200 or --gpu A100-80G-SXMx2")
    if not is_known(raw):
        prefix, suffix = _PREFIX.match(raw), _SUFFIX.match(raw)
        if prefix and not raw.lower().startswith("custom"):
            count, raw, counted = int(prefix.group(1)), prefix.group(2).strip(), True
        elif suffix:
            raw, count, counted = suffix.group(1).strip(), int(suffix.group(2)), True
    if not 1 <= count <= MAX_GPUS:
        raise ServetuneError(
            f"GPU count in {text!r} must be between 1 and {MAX_GPUS}", "write e.g. A100-80G-SXMx2 (two GPUs)"
        )
    if raw.lower().startswith("custom"):
        return GpuChoice(parse_custom(raw), count, counted)
    if raw.lower() in ("local", "auto"):
        gpu, found = local_gpu()
        return GpuChoice(gpu, count if counted else found, True)
    return GpuChoice(get_gpu(raw), count, counted)


def local_gpu() -> tuple[GPUSpec, int]:
    """The local GPU model (the first device's) and how many devices of that model there are."""
    devices = read_devices()
    if not devices:
        raise ServetuneError(
            "no local GPU found (NVML unavailable: no driver, no GPU, or package nvidia-ml-py not installed)",
            "name the GPU instead, e.g. --gpu A100-80G-SXMx2",
        )
    first = devices[0]
    gpu = match_catalog(first.name, first.total_bytes)
    if gpu is None:
        raise ServetuneError(
            f"local GPU {first.name!r} is not in the catalog",
            f"describe it: --gpu 'custom:mem={first.total_bytes / 1024**3:.1f},"
            "bw=<GB/s>,tflops=<dense TFLOP/s>,cc=<x.y>'",
        )
    return gpu, sum(1 for d in devices if d.name == first.name)
