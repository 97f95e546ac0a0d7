"""GPU catalog: memory, bandwidth, dense tensor throughput, compute capability, interconnect.

`memory_bytes` is the total the CUDA driver reports (what vLLM multiplies by `gpu_memory_utilization`), a bit
below the marketing size (an "80 GB" A100 reports about 79.15 GiB). These totals are typical values, not
measured on every SKU; detection through NVML (`servetune.hardware.nvml`) or a custom GPU replaces them.
Throughput figures are dense (no 2:4 sparsity), from NVIDIA datasheets/whitepapers (sources in
../shared/reference/vllm-memory-metrics-flags.md section 4); A10G's 70 TFLOP/s is a third-party figure.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from servetune.errors import ServetuneError

GiB = 1024**3
GB = 1000**3
TB = 1000**4


class GPUSpec(BaseModel):
    """One GPU model as the planner uses it."""

    model_config = ConfigDict(frozen=True)

    name: str
    memory_bytes: int = Field(description="Total device memory as CUDA reports it (vLLM's budget base).")
    nominal_memory_gb: float
    bandwidth_bytes_s: float
    bf16_tflops: float | None = Field(description="Dense BF16 tensor TFLOP/s; None = no BF16 (Volta).")
    fp16_tflops: float
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    compute_capability: float
    interconnect: str = "pcie"
    link_bandwidth_bytes_s: float = 25 * GB
    """Per-direction GPU-to-GPU bandwidth that tensor-parallel all-reduces see."""
    aliases: tuple[str, ...] = ()
    source: str = "catalog"

    @property
    def supports_bf16(self) -> bool:
        """BF16 needs compute capability 8.0 (Ampere)."""
        return self.compute_capability >= 8.0 and self.bf16_tflops is not None

    @property
    def supports_flash_attention(self) -> bool:
        """vLLM's FlashAttention backend needs compute capability >= 8.0."""
        return self.compute_capability >= 8.0

    @property
    def flash_attention_fp8_kv(self) -> bool:
        """FlashAttention reads FP8 KV only on Hopper (FA3) and Blackwell (FA4)."""
        return self.compute_capability >= 9.0

    def peak_tflops(self, dtype: str) -> float:
        """Dense tensor TFLOP/s for a compute dtype (`bfloat16`, `float16`, `fp8`)."""
        if dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        if dtype == "bfloat16" and self.bf16_tflops:
            return self.bf16_tflops
        return self.fp16_tflops


def _gpu(
    name: str,
    mem_gib: float,
    nominal: float,
    bw_gbs: float,
    bf16: float | None,
    fp16: float,
    fp8: float | None,
    cc: float,
    interconnect: str,
    link_gbs: float,
    *aliases: str,
) -> GPUSpec:
    return GPUSpec(
        name=name,
        memory_bytes=int(mem_gib * GiB),
        nominal_memory_gb=nominal,
        bandwidth_bytes_s=bw_gbs * GB,
        bf16_tflops=bf16,
        fp16_tflops=fp16,
        fp8_tflops=fp8,
        int8_tops=(2 * fp16 if cc >= 7.5 else None),
        compute_capability=cc,
        interconnect=interconnect,
        link_bandwidth_bytes_s=link_gbs * GB,
        aliases=aliases,
    )


CATALOG: tuple[GPUSpec, ...] = (
    _gpu("A100-40G-PCIe", 39.39, 40, 1555, 312, 312, None, 8.0, "pcie", 25, "a100-40g-pcie", "a100-pcie-40gb"),
    _gpu(
        "A100-40G-SXM",
        39.39,
        40,
        1555,
        312,
        312,
        None,
        8.0,
        "nvlink",
        300,
        "a100-40g",
        "a100-sxm4-40gb",
        "a100-40g-sxm4",
    ),
    _gpu(
        "A100-80G-PCIe",
        79.15,
        80,
        1935,
        312,
        312,
        None,
        8.0,
        "pcie",
        25,
        "a100-80g-pcie",
        "a100-pcie-80gb",
    ),
    _gpu(
        "A100-80G-SXM",
        79.15,
        80,
        2039,
        312,
        312,
        None,
        8.0,
        "nvlink",
        300,
        "a100-80g",
        "a100-sxm4-80gb",
        "a100-80g-sxm4",
    ),
    _gpu("H100-PCIe", 79.19, 80, 2000, 756, 756, 1513, 9.0, "pcie", 50, "h100-pcie", "h100-80g-pcie"),
    _gpu(
        "H100-SXM",
        79.19,
        80,
        3350,
        989,
        989,
        1979,
        9.0,
        "nvlink",
        450,
        "h100",
        "h100-80g",
        "h100-sxm5",
        "h100-80gb-hbm3",
    ),
    _gpu("H100-NVL", 93.09, 94, 3900, 835, 835, 1671, 9.0, "nvlink", 300, "h100-nvl"),
    _gpu("H200", 139.81, 141, 4800, 989, 989, 1979, 9.0, "nvlink", 450, "h200-sxm", "h200-141g"),
    _gpu("H200-NVL", 139.81, 141, 4800, 836, 836, 1671, 9.0, "nvlink", 450, "h200-nvl"),
    _gpu(
        "V100-16G", 15.77, 16, 900, None, 125, None, 7.0, "nvlink", 150, "v100-16g", "v100-sxm2-16gb", "v100-16g-sxm2"
    ),
    _gpu(
        "V100-32G",
        31.74,
        32,
        900,
        None,
        125,
        None,
        7.0,
        "nvlink",
        150,
        "v100-32g",
        "v100-sxm2-32gb",
        "v100-32g-sxm2",
    ),
    _gpu("V100-32G-PCIe", 31.74, 32, 900, None, 112, None, 7.0, "pcie", 12, "v100-pcie-32gb", "v100-32g-pcie"),
    _gpu("V100S-32G", 31.74, 32, 1134, None, 130, None, 7.0, "pcie", 12, "v100s", "v100s-pcie-32gb"),
    _gpu("A10", 22.07, 24, 600, 125, 125, None, 8.6, "pcie", 25, "a10"),
    _gpu("A10G", 22.07, 24, 600, 70, 70, None, 8.6, "pcie", 25, "a10g"),
    _gpu("L4", 21.96, 24, 300, 121, 121, 242.5, 8.9, "pcie", 25, "l4"),
    _gpu("L40S", 44.39, 48, 864, 362, 362, 733, 8.9, "pcie", 25, "l40s"),
    _gpu("RTX-4090", 23.65, 24, 1008, 165, 165, 330, 8.9, "pcie", 25, "rtx4090", "4090", "geforce-rtx-4090"),
    _gpu("RTX-3090", 23.58, 24, 936, 71, 71, None, 8.6, "pcie", 25, "rtx3090", "3090", "geforce-rtx-3090"),
)


AMBIGUOUS: dict[str, tuple[str, ...]] = {
    "a100": ("A100-40G-PCIe", "A100-40G-SXM", "A100-80G-PCIe", "A100-80G-SXM"),
    "a100-sxm": ("A100-40G-SXM", "A100-80G-SXM"),
    "a100-pcie": ("A100-40G-PCIe", "A100-80G-PCIe"),
    "v100": ("V100-16G", "V100-32G", "V100-32G-PCIe"),
}
"""Family names that stand for GPUs of different memory: guessing one would change the whole ledger, so they
are an error that lists the choices (`--gpu A100x2` once became an 80 GB SXM without a word). `H100` stays the
SXM5 80 GB part, as NVIDIA itself names it."""


def _norm(name: str) -> str:
    """Lower-case, no spaces/underscores/'nvidia'/'tesla', and `80gb` -> `80g`."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    for word in ("nvidia-", "tesla-", "geforce-"):
        key = key.replace(word, "")
    key = re.sub(r"(\d+)gb?\b", r"\1g", key)
    return re.sub(r"-+", "-", key).strip("-")


def _index() -> dict[str, GPUSpec]:
    index: dict[str, GPUSpec] = {}
    for gpu in CATALOG:
        for key in (gpu.name, *gpu.aliases):
            index[_norm(key)] = gpu
            index[_norm(key).replace("-", "")] = gpu
    return index


_INDEX = _index()


def _lookup(name: str) -> GPUSpec | None:
    key = _norm(name)
    return _INDEX.get(key) or _INDEX.get(key.replace("-", ""))


def is_known(name: str) -> bool:
    """True when `name` is exactly a catalog GPU or alias (no count suffix)."""
    return _lookup(name) is not None


def gpu_names() -> list[str]:
    """Catalog names, for help texts and errors."""
    return [gpu.name for gpu in CATALOG]


def get_gpu(name: str) -> GPUSpec:
    """A catalog GPU by name or alias (case, dashes, `GB`/`G` and the NVIDIA prefix do not matter)."""
    gpu = _lookup(name)
    family = AMBIGUOUS.get(_norm(name)) or AMBIGUOUS.get(_norm(name).replace("-", ""))
    if gpu is None and family:
        raise ServetuneError(
            f"GPU {name!r} is ambiguous: it comes as {', '.join(family)}",
            f"name the exact model, e.g. --gpu {family[-1]} (append xN for N GPUs: {family[-1]}x2)",
        )
    if gpu is None:
        raise ServetuneError(
            f"unknown GPU {name!r}",
            "use one of " + ", ".join(gpu_names()) + ", 'local' (NVML), or a custom GPU "
            "'custom:mem=48,bw=864,tflops=362,cc=8.9' (GiB, GB/s, dense TFLOP/s)",
        )
    return gpu


def custom_gpu(
    memory_gib: float,
    bandwidth_gbs: float,
    tflops: float,
    *,
    compute_capability: float = 8.0,
    fp8_tflops: float | None = None,
    link_gbs: float = 25,
    name: str = "custom",
) -> GPUSpec:
    """A GPU described by its numbers (memory as CUDA reports it, in GiB)."""
    if memory_gib <= 0 or bandwidth_gbs <= 0 or tflops <= 0:
        raise ServetuneError(
            "a custom GPU needs positive memory, bandwidth and TFLOP/s", "e.g. custom:mem=48,bw=864,tflops=362"
        )
    return GPUSpec(
        name=name,
        memory_bytes=int(memory_gib * GiB),
        nominal_memory_gb=round(memory_gib * GiB / GB, 1),
        bandwidth_bytes_s=bandwidth_gbs * GB,
        bf16_tflops=tflops if compute_capability >= 8.0 else None,
        fp16_tflops=tflops,
        fp8_tflops=fp8_tflops,
        compute_capability=compute_capability,
        interconnect="nvlink" if link_gbs >= 100 else "pcie",
        link_bandwidth_bytes_s=link_gbs * GB,
        source="custom",
    )


def parse_custom(text: str) -> GPUSpec:
    fields: dict[str, float] = {}
    for part in text.split(":", 1)[1].split(","):
        if "=" not in part:
            raise ServetuneError(
                f"bad custom GPU field {part!r} in {text!r}", "write key=value pairs: mem, bw, tflops, fp8, cc, link"
            )
        key, value = part.split("=", 1)
        try:
            fields[key.strip().lower()] = float(value)
        except ValueError as err:
            raise ServetuneError(
                f"custom GPU field {key!r} is not a number: {value!r}", "e.g. custom:mem=48,bw=864,tflops=362"
            ) from err
    missing = [k for k in ("mem", "bw", "tflops") if k not in fields]
    if missing:
        raise ServetuneError(f"custom GPU lacks {', '.join(missing)}", "e.g. custom:mem=48,bw=864,tflops=362,cc=8.9")
    return custom_gpu(
        fields["mem"],
        fields["bw"],
        fields["tflops"],
        compute_capability=fields.get("cc", 8.0),
        fp8_tflops=fields.get("fp8"),
        link_gbs=fields.get("link", 25),
    )
