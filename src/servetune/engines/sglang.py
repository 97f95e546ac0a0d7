"""SGLang: argv (`python -m sglang.launch_server`), log facts, failures.

SGLang needs a CUDA/ROCm GPU, so it cannot run on servetune's CPU test machines: the argv mapping and the log
parsing are tested on representative log text, the launch path is the same code as vLLM's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from servetune.engines.adapter import EngineAdapter, Image, installed_version, last_float, last_int
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import Pattern, pattern

_R = {
    name: re.compile(rx, re.MULTILINE)
    for name, rx in {
        "load": r"Load weight end\.(?: elapsed=([\d.]+) s,)?.*?type=(\w+),(?: dtype=(?:torch\.)?(\w+),)?"
        r" avail mem=([\d.]+) GB, mem usage=([\d.]+) GB",
        "kv_tokens": r"KV Cache is allocated\. #tokens: (\d+)",
        "kv_size": r"KV Cache is allocated\..*?KV size: ([\d.]+) GB",
        "kv_kv": r"KV Cache is allocated\..*?K size: ([\d.]+) GB, V size: ([\d.]+) GB",
        "graph": r"Capture (?:cuda|npu) graph end\. Time elapsed: ([\d.]+) s\. mem usage=([\d.]+) GB",
        "max_total": r"max_total_num_tokens=(\d+)",
        "chunked": r"chunked_prefill_size=(-?\d+)",
        "max_running": r"max_running_requests=(\d+)",
        "context_len": r"context_len=(\d+)",
        "backend": r"attention_backend='?(\w+)'?",
        "page_size": r"page_size=(\d+)",
        "server_args": r"server_args=ServerArgs\(",
    }.items()
}

SGLANG_PATTERNS: tuple[Pattern, ...] = (
    pattern(
        "no_cache_memory",
        r".*Not enough memory\. Please try to increase --mem-fraction-static.*",
        "Nothing is left for the KV cache: raise --mem-fraction-static, lower --max-running-requests or "
        "--chunked-prefill-size, or add GPUs (--tp-size).",
    ),
    pattern(
        "kv_too_small",
        r".*(?:context_len|max_total_num_tokens).*(?:exceeds|larger than|too small).*",
        "The KV pool is smaller than one request of context length: lower --context-length or raise "
        "--mem-fraction-static.",
    ),
    pattern(
        "warmup_oom",
        r".*(?:Capture cuda graph failed|cuda graph).*(?:out of memory|OutOfMemory).*",
        "OOM while capturing CUDA graphs: lower --cuda-graph-max-bs or --mem-fraction-static, or --disable-cuda-graph.",
    ),
    pattern(
        "weights_oom",
        r".*(?:CUDA out of memory|torch\.OutOfMemoryError).*",
        "The weights do not fit: use --tp-size, a quantized checkpoint, or lower --mem-fraction-static if "
        "another process holds memory.",
    ),
    pattern(
        "unsupported_model",
        r".*(?:Unsupported architectures?|is not supported|not supported for now|Model architectures? .* "
        r"(?:are|is) not supported).*",
        "This SGLang build cannot run this model/dtype: use a supported --dtype or a newer SGLang.",
    ),
    pattern(
        "model_missing",
        r".*(?:Repo id must be|HFValidationError|does not appear to have a file named|"
        r"is not a local folder and is not a valid model identifier|LocalEntryNotFoundError).*",
        "The model path does not exist and is not a Hugging Face id: check --model-path.",
    ),
    pattern(
        "invalid_flag",
        r".*error: (?:unrecognized arguments|argument [^:]+:).*",
        "SGLang rejected a flag: check it against `python -m sglang.launch_server --help`.",
    ),
)

_PROGRESS = tuple(
    re.compile(rx)
    for rx in (
        r"Load weight begin",
        r"Load weight end",
        r"KV Cache is allocated",
        r"Capture cuda graph",
        r"max_total_num_tokens=",
        r"fired up and ready to roll",
    )
)


class SglangAdapter(EngineAdapter):
    """SGLang's OpenAI-compatible server."""

    name = "sglang"
    progress_patterns = _PROGRESS

    shell_program: tuple[str, ...] = ("python", "-m", "sglang.launch_server")
    image_program: tuple[str, ...] = ("python3", "-m", "sglang.launch_server")
    """lmsysorg/sglang's images bring the server as a module of their python3."""
    model_flag = "--model-path"

    def program(self) -> list[str]:
        return [sys.executable, "-m", "sglang.launch_server"]

    def image(self, version: str | None, gpus: int) -> Image:
        return self.pinned("lmsysorg/sglang", "v{release}", version)

    def version(self) -> str | None:
        return installed_version("sglang")

    def parse_log(self, text: str) -> EngineFacts:
        return parse_sglang_log(text)

    def failure_patterns(self) -> Sequence[Pattern]:
        return SGLANG_PATTERNS


def parse_sglang_log(text: str) -> EngineFacts:
    """Weights, KV pool and graph facts from an SGLang startup log, in vLLM's field names."""
    load = _R["load"].findall(text)
    graph = _R["graph"].findall(text)
    kv_gib = last_float(_R["kv_size"], text)
    if kv_gib is None and (kv := _R["kv_kv"].findall(text)):
        kv_gib = round(float(kv[-1][0]) + float(kv[-1][1]), 4)
    chunked = last_int(_R["chunked"], text)
    backend = _R["backend"].findall(text)
    return EngineFacts(
        engine="sglang",
        version=installed_version("sglang"),
        dtype=(load[-1][2] or None) if load else None,
        weights_gib=float(load[-1][4]) if load else None,
        weights_load_s=float(load[-1][0]) if load and load[-1][0] else None,
        available_kv_gib=kv_gib,
        kv_cache_tokens=last_int(_R["kv_tokens"], text) or last_int(_R["max_total"], text),
        max_model_len=last_int(_R["context_len"], text),
        max_num_batched_tokens=chunked if chunked and chunked > 0 else None,
        max_concurrency=float(v) if (v := last_int(_R["max_running"], text)) else None,
        block_size=last_int(_R["page_size"], text),
        attention_backend=backend[-1] if backend else None,
        cuda_graph_gib=float(graph[-1][1]) if graph else None,
        cuda_graph_capture_s=float(graph[-1][0]) if graph else None,
    )
