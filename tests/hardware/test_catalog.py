"""GPU catalog lookups, `NAMExN` parsing and custom GPUs."""

from __future__ import annotations

import pytest

from servetune.errors import ServetuneError
from servetune.hardware.catalog import CATALOG, get_gpu
from servetune.hardware.gpus import parse_gpu_arg
from servetune.hardware.nvml import match_catalog


@pytest.mark.parametrize(
    ("text", "name", "count"),
    [
        ("A100-80G-SXMx2", "A100-80G-SXM", 2),
        ("2xA100-80GB-PCIe", "A100-80G-PCIe", 2),
        ("H200", "H200", 1),
        ("RTX4090", "RTX-4090", 1),
        ("rtx-4090x4", "RTX-4090", 4),
        ("V100-32GB", "V100-32G", 1),
        ("a10g", "A10G", 1),
        ("L40S*8", "L40S", 8),
    ],
)
def test_parse_gpu_arg(text: str, name: str, count: int) -> None:
    choice = parse_gpu_arg(text)
    assert (choice.gpu.name, choice.count) == (name, count)


def test_catalog_covers_the_issue_list_with_sane_numbers() -> None:
    names = {g.name for g in CATALOG}
    for needed in (
        "A100-40G-PCIe",
        "A100-40G-SXM",
        "A100-80G-PCIe",
        "A100-80G-SXM",
        "H100-PCIe",
        "H100-SXM",
        "H200",
        "V100-16G",
        "V100-32G",
        "A10G",
        "L4",
        "L40S",
        "RTX-4090",
        "RTX-3090",
    ):
        assert needed in names
    for g in CATALOG:
        assert 0.9 < g.memory_bytes / (g.nominal_memory_gb * 1024**3) < 1.0  # CUDA total sits below the label
        assert g.bandwidth_bytes_s > 1e11 and g.fp16_tflops > 10
    assert not get_gpu("V100-32G").supports_bf16 and get_gpu("A100-80G-SXM").supports_bf16
    assert get_gpu("H100").fp8_tflops == 1979 and get_gpu("A100-80G-SXM").fp8_tflops is None


@pytest.mark.parametrize("text", ["A100x2", "a100", "2xV100", "A100-SXM", "a100-pcie"])
def test_family_names_of_different_memory_are_an_error_not_a_guess(text: str) -> None:
    # 0.1 read `--gpu A100x2` as two 80 GB SXM A100s without a word.
    with pytest.raises(ServetuneError, match="ambiguous") as err:
        parse_gpu_arg(text)
    assert err.value.fix and "x2" in err.value.fix


@pytest.mark.parametrize("text", ["H200x0", "H200x99999", " ", "x2"])
def test_bad_counts_and_empty_names_are_clear_errors(text: str) -> None:
    with pytest.raises(ServetuneError):
        parse_gpu_arg(text)


def test_custom_gpu_and_errors() -> None:
    choice = parse_gpu_arg("custom:mem=48,bw=864,tflops=362,cc=8.9x2")
    gpu = choice.gpu
    assert choice.count == 2 and choice.counted and gpu.memory_bytes == 48 * 1024**3 and gpu.compute_capability == 8.9
    with pytest.raises(ServetuneError, match="unknown GPU"):
        get_gpu("B300-ultra")
    with pytest.raises(ServetuneError, match="lacks"):
        parse_gpu_arg("custom:mem=48")


def test_nvml_names_map_to_the_catalog() -> None:
    assert match_catalog("NVIDIA A100-SXM4-80GB", 85_000_000_000).name == "A100-80G-SXM"  # type: ignore[union-attr]
    assert match_catalog("NVIDIA H200").name == "H200"  # type: ignore[union-attr]
    assert match_catalog("Tesla V100-SXM2-32GB").name == "V100-32G"  # type: ignore[union-attr]
    assert match_catalog("NVIDIA A10G").name == "A10G"  # type: ignore[union-attr]
    assert match_catalog("Some Future GPU") is None


def test_local_without_nvml_says_what_to_do() -> None:
    from servetune.hardware import nvml

    if nvml.detect():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ServetuneError, match="no local GPU"):
        parse_gpu_arg("local")
