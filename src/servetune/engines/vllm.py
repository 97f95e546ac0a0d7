"""vLLM: argv (`python -m vllm.entrypoints.openai.api_server` or `vllm serve`), env, log facts, failures.

Log lines and error texts follow vLLM V1 (0.11 … 0.33; CPU build 0.32); see
docs in shared/reference (section 3.4/3.5) for where each comes from.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from servetune.engines.adapter import EngineAdapter, Image, first_int, installed_version, last_float, last_int
from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import Pattern, pattern

_R = {
    name: re.compile(rx, re.MULTILINE)
    for name, rx in {
        "version_banner": r"█\s+version\s+(\S+)",
        "version_engine": r"Initializing a V1 LLM engine \(v([^)\s]+)\)",
        "version_plain": r"vLLM API server version (\S+)",
        "non_default": r"non-default args: (\{.*\})\s*$",
        "dtype": r"Initializing a V1 LLM engine .*?\bdtype=(?:torch\.)?(\w+)",
        "max_model_len": r"Using max model len (\d+)",
        "max_seq_len": r"Initializing a V1 LLM engine .*?\bmax_seq_len=(\d+)",
        "chunked": r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
        "model_loading": r"Model loading took ([\d.]+) ?GiB(?: memory)? and ([\d.]+) s",
        "loading_weights": r"Loading weights took ([\d.]+) s",
        "backend": r"Using (?:AttentionBackendEnum\.)?([A-Z][A-Z0-9_]+) (?:attention )?backend",
        "block_size": r"Setting attention block size to (\d+) tokens",
        "block_size_cfg": r"\bblock_size=(\d+)",
        "available_kv": r"Available KV cache memory: ([\d.]+) GiB",
        "explicit_kv": r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache",
        "kv_tokens": r"(?:GPU|CPU|XPU|TPU)? ?KV cache size: ([\d,]+) tokens",
        "concurrency": r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x",
        "graph_estimate": r"Estimated CUDA graph memory: ([\d.]+) GiB",
        "graph_done": r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB",
        "compile": r"torch\.compile (?:takes?|took) ([\d.]+) s in total",
        "cache_dir": r"torch_compile_cache/([0-9a-f]{6,})/",
        "aot_dir": r"torch_aot_compile/([0-9a-f]{6,})/",
        "cache_loaded": r"Directly load (?:the compiled graph\(s\) for compile range|AOT compilation from path)",
        "cache_compiled": r"Compiling a graph for compile range|saved AOT compiled function to|"
        r"Compiling model again due to a load failure",
        "cache_load_failure": r"Compiling model again due to a load failure from \S+, reason: (.*)$",
        "init_engine": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
        "auto_fit": r"Auto-fit max_model_len: reduced from (\d+) to (\d+)",
        "equivalent": r"current --gpu-memory-utilization=([\d.]+) is equivalent to --gpu-memory-utilization=([\d.]+)",
        "capacity_line": r"(?:GPU|CPU|XPU|TPU) KV cache size: [\d,]+ tokens(?:, Maximum concurrency[^\n]*x)?",
        "concurrency_line": r"Maximum concurrency for [\d,]+ tokens per request: [\d.]+x",
        "engine_config": r"Initializing a V1 LLM engine .*$",
        "kv_cache_dtype": r"Initializing a V1 LLM engine .*?\bkv_cache_dtype=(\w+)",
        "prefix_caching": r"Initializing a V1 LLM engine .*?\benable_prefix_caching=(True|False)",
        "chunked_prefill": r"Initializing a V1 LLM engine .*?\benable_chunked_prefill=(True|False)",
    }.items()
}


def _kv_hint(m: re.Match[str]) -> str:
    est = m.groupdict().get("est")
    fix = f"lower --max-model-len to at most {est} (vLLM's estimate)" if est else "lower --max-model-len"
    return (
        f"The KV cache cannot hold one request of max_model_len: {fix}, or give the KV cache more memory "
        "(--gpu-memory-utilization, --kv-cache-memory-bytes; on CPU builds VLLM_CPU_KVCACHE_SPACE), or "
        "use --kv-cache-dtype fp8."
    )


VLLM_PATTERNS: tuple[Pattern, ...] = (
    pattern(
        "kv_too_small",
        r"To serve at least one request with the models?'?s? max seq len \((?P<len>\d+)\).*?"
        r"(?:estimated maximum model length is (?P<est>\d+))?\.?(?: Try|$)",
        _kv_hint,
        "est",
    ),
    pattern(
        "kv_too_small",
        r"The model's max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens that can "
        r"be stored in KV cache \((?P<est>\d+)\)",
        _kv_hint,
        "est",
    ),
    pattern(
        "no_cache_memory",
        r"No available memory for the cache blocks|Cannot auto-fit max_model_len: not enough",
        "Nothing is left for the KV cache after weights and activations: raise --gpu-memory-utilization "
        "(or --kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE on CPU), lower --max-num-batched-tokens or "
        "--max-num-seqs, quantize, or add GPUs (--tensor-parallel-size).",
    ),
    pattern(
        "warmup_oom",
        r"out of memory occurred when warming up sampler.*|"
        r"(?:CUDA graph|cudagraph|Graph captur).*(?:out of memory|OutOfMemory).*|"
        r"(?:out of memory|OutOfMemory).*(?:CUDA graph|cudagraph|capture)",
        "OOM while warming up (sampler or CUDA-graph capture): lower --max-num-seqs, "
        "--gpu-memory-utilization or --max-cudagraph-capture-size, or try --enforce-eager.",
    ),
    pattern(
        "weights_oom",
        r"Failed to load model - not enough GPU memory.*|"
        r"Free memory on device .* is less than desired GPU memory utilization.*|"
        r"torch\.OutOfMemoryError.*|CUDA out of memory.*|(?:Available|Free) memory .* less than .*",
        "The weights do not fit: use more GPUs (--tensor-parallel-size), a quantized checkpoint "
        "(--quantization), lower --gpu-memory-utilization if another process holds memory, or free the GPU.",
    ),
    pattern(
        "unsupported_model",
        r"Model architectures? \[.*?\] (?:are|is) not supported.*|.*not supported for now.*|"
        r".*Bfloat16 is only supported on GPUs with compute capability.*|"
        r".*(?:dtype|data type) .* is not supported.*|.*doesn't support torch\.bfloat16.*|"
        r".*[Uu]nsupported (?:model )?architecture.*",
        "This vLLM build cannot run this model/dtype: pick a supported --dtype (e.g. float16 on pre-Ampere "
        "GPUs), a newer vLLM for new architectures, or --trust-remote-code if the model needs it.",
    ),
    pattern(
        "model_missing",
        r".*(?:Invalid repository ID or local directory specified|does not appear to have a file named|"
        r"is not a local folder and is not a valid model identifier|Repo id must be|HFValidationError|"
        r"LocalEntryNotFoundError|Can't load the configuration of|No such file or directory: .*"
        r"(?:config\.json|\.safetensors)|We couldn't connect to 'https://huggingface\.co').*",
        "The model is neither a local directory with config.json nor a reachable Hugging Face id: check the "
        "path (servetune passes it as given), or download it first when offline (HF_HUB_OFFLINE=1).",
    ),
    pattern(
        "invalid_flag",
        r".*error: (?:unrecognized arguments|argument [^:]+:).*|"
        r".*User-specified max_model_len \(\d+\) is greater than the derived max_model_len.*|"
        r".*max_num_batched_tokens \(\d+\) (?:must be greater than or equal to|is smaller than).*",
        "vLLM rejected a flag or value: check it against `vllm serve --help` for this version (servetune "
        "passes flags through by name); for a longer max_model_len set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
    ),
)

_PROGRESS = tuple(
    re.compile(rx)
    for rx in (
        r"non-default args",
        r"Resolved architecture",
        r"Using max model len",
        r"Initializing a V1 LLM engine",
        r"Starting to load model",
        r"Loading weights took",
        r"Model loading took",
        r"Available KV cache memory",
        r"Explicitly set .* for KV cache",
        r"KV cache size:",
        r"Graph capturing finished",
        r"torch\.compile t(?:ake|ook)",
        r"init engine \(profile",
        r"Starting vLLM (?:API )?server",
        r"Application startup complete",
        r"Capturing CUDA graphs",
        r"Memory profiling takes",
    )
)


@cache
def is_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (`vllm-cpu`): its engines hold their KV cache in host RAM."""
    return installed_version("vllm-cpu") is not None


def _local_model(model: str) -> bool:
    return Path(model).expanduser().exists()


def vllm_command(python: str | None = None) -> list[str]:
    """How to start vLLM's OpenAI server: through this Python when it can import vllm (the CPU build's
    `vllm` console script looks for a distribution named `vllm` and fails), else the `vllm serve` script."""
    if installed_version("vllm", "vllm-cpu") is not None or python:
        return [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    exe = shutil.which("vllm")
    return [exe, "serve"] if exe else [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


class VllmAdapter(EngineAdapter):
    """vLLM's OpenAI-compatible server."""

    name = "vllm"
    progress_patterns = _PROGRESS
    shell_program: tuple[str, ...] = ("vllm", "serve")
    image_program: tuple[str, ...] = ("vllm", "serve")
    """vllm/vllm-openai's own entrypoint."""

    def program(self) -> list[str]:
        return vllm_command()

    def model_args(self, model: str, program: Sequence[str]) -> list[str]:
        """`vllm serve MODEL`; the API server module takes `--model MODEL`."""
        return [model] if program[-1] == "serve" else ["--model", model]

    def image(self, version: str | None, gpus: int) -> Image:
        return self.pinned("vllm/vllm-openai", "v{release}", version)

    def env(self, cfg: EngineConfig, host: str) -> dict[str, str]:
        """Defaults that make a local launch work offline and on CPU; anything in cfg.env wins."""
        env: dict[str, str] = {}
        if host in ("127.0.0.1", "localhost"):
            env["VLLM_HOST_IP"] = "127.0.0.1"
        if _local_model(cfg.model):
            env["HF_HUB_OFFLINE"] = "1"
        if is_cpu_build() and "kv-cache-memory-bytes" not in cfg.flags:
            env["VLLM_CPU_KVCACHE_SPACE"] = "1"
        return {**env, **cfg.env}

    def version(self) -> str | None:
        return installed_version("vllm", "vllm-cpu")

    def compile_identity(self, cfg: EngineConfig) -> str | None:
        return compile_identity(cfg)

    def parse_log(self, text: str) -> EngineFacts:
        return parse_vllm_log(text)

    def failure_patterns(self) -> Sequence[Pattern]:
        return VLLM_PATTERNS


COMPILE_NEUTRAL_FLAGS = frozenset(
    {
        # CacheConfig.compute_hash's ignored factors (vllm/config/cache.py, 0.24 and 0.32)
        "gpu-memory-utilization",
        "kv-cache-memory-bytes",
        "num-gpu-blocks-override",
        "enable-prefix-caching",
        "prefix-caching-hash-algo",
        # ModelConfig.compute_hash's ignored factors (vllm/config/model.py)
        "served-model-name",
        "tokenizer",
        "tokenizer-mode",
        "tokenizer-revision",
        "seed",
        "skip-tokenizer-init",
        "logprobs-mode",
        "disable-cascade-attn",
        "hf-token",
        # the API server's own flags: not part of VllmConfig
        "host",
        "port",
        "api-key",
        "disable-log-requests",
        "enable-log-requests",
        "disable-log-stats",
        "uvicorn-log-level",
    }
)
"""Flags vLLM's compile-cache key (`VllmConfig.compute_hash`) leaves out: changing only these keeps a restart
warm. Every other flag is assumed to change the key (the start's own log says whether it did). Not neutral
although they look it: `max-model-len` and `dtype` (ModelConfig), `max-num-batched-tokens` (SchedulerConfig), and
`max-num-seqs`: 0.32 hashes it, 0.24 only through the CUDA-graph capture sizes (min(2 x max_num_seqs, 512), so
256 and the default 1024 shared a key on the H200: benchmarks/tuning_table/README.md)."""
COMPILE_NEUTRAL_ENV = frozenset(
    {
        "VLLM_CPU_KVCACHE_SPACE",
        "VLLM_HOST_IP",
        "VLLM_API_KEY",
        "VLLM_LOGGING_LEVEL",
        "VLLM_LOGGING_CONFIG_PATH",
        "VLLM_NO_USAGE_STATS",
        "DO_NOT_TRACK",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "CUDA_VISIBLE_DEVICES",
        "HF_TOKEN",
    }
)
"""Environment variables that change no compiled graph (vLLM also hashes its compile-relevant environment)."""


def compile_identity(cfg: EngineConfig) -> str | None:
    """A short hash of what vLLM's compile-cache key depends on as far as the config shows it (the model, the
    version, every flag but `COMPILE_NEUTRAL_FLAGS`, the environment but `COMPILE_NEUTRAL_ENV`); None with
    `--enforce-eager`, which compiles nothing. Equal identities predict a warm start; it is a prediction, and the
    start's log (`compile_cache_facts`) says what happened."""
    flags = cfg.flags
    if flags.get("enforce-eager") is True:
        return None
    kept = {k: v for k, v in flags.items() if k not in COMPILE_NEUTRAL_FLAGS and v is not None}
    env = {k: v for k, v in cfg.env.items() if k not in COMPILE_NEUTRAL_ENV}
    factors = {"model": cfg.model, "version": cfg.version, "flags": kept, "env": env}
    blob = json.dumps(factors, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _non_default_args(text: str) -> dict | None:
    m = list(_R["non_default"].finditer(text))
    if not m:
        return None
    try:
        value = ast.literal_eval(m[-1].group(1))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, dict) else None


def parse_vllm_log(text: str) -> EngineFacts:
    """Facts from a vLLM startup log (any subset of lines; missing facts stay None)."""
    version = next(
        (m[-1] for key in ("version_banner", "version_engine", "version_plain") if (m := _R[key].findall(text))), None
    )
    dtype = _R["dtype"].findall(text)
    backend = _R["backend"].findall(text)
    concurrency = _R["concurrency"].findall(text)
    graph = _R["graph_done"].findall(text)
    auto_fit = _R["auto_fit"].findall(text)
    model_loading = _R["model_loading"].findall(text)
    # With tensor parallelism every rank prints its own figures: vLLM keeps the smallest KV pool of all ranks, and
    # the largest weights share bounds what one GPU holds.
    available = [float(x) for x in _R["available_kv"].findall(text)]
    kv_gib = min(available) if available else last_float(_R["explicit_kv"], text)
    equivalent = _R["equivalent"].findall(text)
    cache = compile_cache_facts(text)
    lines = [m.group(0) for m in _R["capacity_line"].finditer(text)]
    lines += [m.group(0) for m in _R["concurrency_line"].finditer(text) if not any(m.group(0) in x for x in lines)]
    return EngineFacts(
        engine="vllm",
        version=version,
        non_default_args=_non_default_args(text),
        dtype=dtype[-1] if dtype else None,
        # The engine's own config line is authoritative; "Using max model len" repeats for a drafter model
        # (MTP), so only its first occurrence is the target's.
        max_model_len=last_int(_R["max_seq_len"], text) or first_int(_R["max_model_len"], text),
        max_num_batched_tokens=last_int(_R["chunked"], text),
        weights_gib=max(float(m[0]) for m in model_loading) if model_loading else None,
        weights_load_s=float(model_loading[-1][1]) if model_loading else last_float(_R["loading_weights"], text),
        attention_backend=backend[-1] if backend else None,
        block_size=last_int(_R["block_size"], text) or last_int(_R["block_size_cfg"], text),
        available_kv_gib=kv_gib,
        kv_cache_tokens=last_int(_R["kv_tokens"], text),
        max_concurrency=float(concurrency[-1][1]) if concurrency else None,
        max_concurrency_tokens_per_request=int(concurrency[-1][0].replace(",", "")) if concurrency else None,
        cuda_graph_estimate_gib=last_float(_R["graph_estimate"], text),
        cuda_graph_gib=float(graph[-1][1]) if graph else None,
        cuda_graph_capture_s=float(graph[-1][0]) if graph else None,
        compile_s=last_float(_R["compile"], text),
        init_engine_s=last_float(_R["init_engine"], text),
        auto_fit_max_model_len=int(auto_fit[-1][1]) if auto_fit else None,
        compile_cache=cache["compile_cache"],
        compile_cache_key=cache["compile_cache_key"],
        compile_cache_note=cache["compile_cache_note"],
        util_with_graphs=float(equivalent[-1][0]) if equivalent else None,
        util_without_graphs=float(equivalent[-1][1]) if equivalent else None,
        capacity_lines=lines or None,
        kv_cache_dtype=kv_dtype[-1] if (kv_dtype := _R["kv_cache_dtype"].findall(text)) else None,
        enable_prefix_caching=_flag(_R["prefix_caching"], text),
        enable_chunked_prefill=_flag(_R["chunked_prefill"], text),
        engine_config_line=config_line[-1].split("] ", 1)[-1]
        if (config_line := _R["engine_config"].findall(text))
        else None,
    )


def compile_cache_facts(text: str) -> dict[str, str | None]:
    """Whether a start compiled its graphs or loaded them from vLLM's compile cache, by vLLM's own lines
    (`vllm/compilation/backends.py` and `decorators.py`, the same text in 0.24 and 0.32): "Directly load the
    compiled graph(s) for compile range ... from the cache" or "Directly load AOT compilation from path" is a
    load; "Compiling a graph for compile range", "saved AOT compiled function to" or "Compiling model again due
    to a load failure" is a compile. One compile makes the start cold: its time is a compile's."""
    loaded = bool(_R["cache_loaded"].search(text))
    compiled = bool(_R["cache_compiled"].search(text))
    key = _R["cache_dir"].findall(text) or _R["aot_dir"].findall(text)
    failure = _R["cache_load_failure"].findall(text)
    return {
        "compile_cache": "cold" if compiled else ("warm" if loaded else None),
        "compile_cache_key": key[0] if key else None,
        "compile_cache_note": failure[-1].strip() if failure else None,
    }


def _flag(pattern: re.Pattern[str], text: str) -> bool | None:
    """The last `name=True|False` a pattern finds."""
    found = pattern.findall(text)
    return found[-1] == "True" if found else None
