"""Reading vLLM flags (EngineConfig.flags, vLLM's own names without dashes) into typed planner inputs.

Values are read the way vLLM's argument parser reads them: `128k` = 128,000 and `128K` = 131,072
(`human_readable_int`), `-1`/`auto` for an auto-fitted max_model_len, JSON strings for `speculative-config`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")


def human_readable_int(value: Any, flag: str = "value") -> int:
    """vLLM's `human_readable_int`: `1k`=1000, `1K`=1024, `25.6k`=25600; decimals only with k/m/g/t."""
    if isinstance(value, bool):
        raise ServetuneError(f"--{flag} needs a number, got {value!r}", f"e.g. --{flag} 32768 or 32k / 32K")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip()
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kKmMgGtT]?)", text)
    if not m:
        raise ServetuneError(
            f"--{flag} {text!r} is not a number", f"e.g. --{flag} 131072, 128K (=131072) or 128k (=128000)"
        )
    number, suffix = m.groups()
    if not suffix:
        if "." in number:
            raise ServetuneError(f"--{flag} {text!r} must be a whole number", f"e.g. --{flag} 131072")
        return int(number)
    if suffix in _BINARY:
        if "." in number:
            raise ServetuneError(
                f"--{flag} {text!r}: vLLM allows decimals only with decimal suffixes (k, m, g, t)",
                "write e.g. 25.6k or 32K",
            )
        return int(number) * _BINARY[suffix]
    return int(float(number) * _DECIMAL[suffix])


class PlanInputs(BaseModel):
    """The flags that shape vLLM's ledger, resolved to values (None = vLLM's default applies)."""

    model_config = ConfigDict(frozen=True)

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    """Independent replicas; each holds its own KV pool (capacity figures are per replica)."""
    max_model_len: int | None = None
    """None = the model's max_position_embeddings; -1 = auto-fit to memory."""
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str | None = None
    quantization: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    block_size: int | None = None
    num_speculative_tokens: int = 0
    speculative_method: str | None = None
    language_model_only: bool | None = None
    enforce_eager: bool = False
    num_gpu_blocks_override: int | None = None
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    attention_backend: str | None = None
    max_cudagraph_capture_size: int | None = None

    @property
    def kv_fp8(self) -> bool:
        """True for the FP8 KV-cache formats (one byte per element)."""
        return self.kv_cache_dtype in FP8_KV


_ALIASES = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "sc": "speculative-config",
    "q": "quantization",
}


def flag_key(name: str) -> str:
    """A flag's canonical vLLM name: no dashes in front, `-` for `_`, short aliases (`tp`) expanded."""
    key = name.lstrip("-").replace("_", "-")
    return _ALIASES.get(key, key)


def _bool(value: Any, flag: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", ""):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ServetuneError(f"--{flag} takes true/false, got {value!r}", f"pass --{flag} or --no-{flag}")


def _number(value: Any, flag: str, kind: type = int) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError) as err:
        raise ServetuneError(f"--{flag} needs a number, got {value!r}", f"e.g. --{flag} 2") from err


def _speculative(value: Any) -> tuple[str | None, int]:
    if value is None:
        return None, 0
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ServetuneError(
                f"--speculative-config is not JSON: {value!r}",
                """write it like '{"method": "mtp", "num_speculative_tokens": 2}'""",
            ) from err
    if not isinstance(value, dict):
        raise ServetuneError(
            "--speculative-config must be a JSON object", """e.g. '{"method": "mtp", "num_speculative_tokens": 2}'"""
        )
    method = value.get("method")
    tokens = value.get("num_speculative_tokens")
    if tokens is None:
        raise ServetuneError(
            "--speculative-config has no num_speculative_tokens", 'add it, e.g. "num_speculative_tokens": 2'
        )
    return (str(method) if method else None), _number(tokens, "speculative-config num_speculative_tokens")


def inputs_from_flags(flags: dict[str, Any]) -> PlanInputs:
    """PlanInputs from vLLM flags; unknown flags are ignored (they pass through to the command line)."""
    f = {flag_key(k): v for k, v in flags.items() if v is not None}
    out: dict[str, Any] = {}
    if "tensor-parallel-size" in f:
        out["tensor_parallel_size"] = _number(f["tensor-parallel-size"], "tensor-parallel-size")
    if "pipeline-parallel-size" in f:
        out["pipeline_parallel_size"] = _number(f["pipeline-parallel-size"], "pipeline-parallel-size")
    if "data-parallel-size" in f:
        out["data_parallel_size"] = _number(f["data-parallel-size"], "data-parallel-size")
    if "max-model-len" in f:
        raw = f["max-model-len"]
        out["max_model_len"] = (
            -1 if str(raw).strip().lower() in ("auto", "-1") else human_readable_int(raw, "max-model-len")
        )
    for flag, field, kind in (
        ("gpu-memory-utilization", "gpu_memory_utilization", float),
        ("max-num-seqs", "max_num_seqs", int),
        ("block-size", "block_size", int),
        ("num-gpu-blocks-override", "num_gpu_blocks_override", int),
        ("max-cudagraph-capture-size", "max_cudagraph_capture_size", int),
    ):
        if flag in f:
            out[field] = _number(f[flag], flag, kind)
    for flag, field in (
        ("max-num-batched-tokens", "max_num_batched_tokens"),
        ("kv-cache-memory-bytes", "kv_cache_memory_bytes"),
    ):
        if flag in f:
            out[field] = human_readable_int(f[flag], flag)
    for flag, field in (
        ("kv-cache-dtype", "kv_cache_dtype"),
        ("dtype", "dtype"),
        ("quantization", "quantization"),
        ("mamba-cache-dtype", "mamba_cache_dtype"),
        ("mamba-ssm-cache-dtype", "mamba_ssm_cache_dtype"),
        ("attention-backend", "attention_backend"),
    ):
        if flag in f:
            out[field] = str(f[flag])
    if "enable-prefix-caching" in f:
        out["enable_prefix_caching"] = _bool(f["enable-prefix-caching"], "enable-prefix-caching")
    if "no-enable-prefix-caching" in f and _bool(f["no-enable-prefix-caching"], "no-enable-prefix-caching"):
        out["enable_prefix_caching"] = False
    if "enable-chunked-prefill" in f:
        out["enable_chunked_prefill"] = _bool(f["enable-chunked-prefill"], "enable-chunked-prefill")
    for flag, field in (("language-model-only", "language_model_only"), ("enforce-eager", "enforce_eager")):
        if flag in f:
            out[field] = _bool(f[flag], flag)
    limits = f.get("limit-mm-per-prompt")
    if isinstance(limits, str):
        limits = json.loads(limits) if limits.strip().startswith("{") else None
    if isinstance(limits, dict) and limits and all(int(v) == 0 for v in limits.values() if not isinstance(v, dict)):
        out.setdefault("language_model_only", True)
    method, tokens = _speculative(f.get("speculative-config"))
    if method or tokens:
        out["speculative_method"], out["num_speculative_tokens"] = method, tokens
    if out.get("kv_cache_dtype") not in (None, "auto", "bfloat16", "float16", "half", *FP8_KV):
        raise ServetuneError(
            f"--kv-cache-dtype {out['kv_cache_dtype']!r} is not modelled",
            "use auto, fp8, fp8_e4m3 or fp8_e5m2",
        )
    return PlanInputs(**out)


BOOL_FLAGS = frozenset(
    {
        "language-model-only",
        "enable-prefix-caching",
        "enforce-eager",
        "enable-chunked-prefill",
        "trust-remote-code",
        "enable-auto-tool-choice",
        "disable-log-requests",
        "disable-log-stats",
        "async-scheduling",
        "disable-hybrid-kv-cache-manager",
        "enable-expert-parallel",
        "no-enable-prefix-caching",
        "enable-lora",
        "disable-custom-all-reduce",
        "enable-log-requests",
        "no-enable-chunked-prefill",
        "no-async-scheduling",
    }
)
_SHORT = {
    "-tp": "tensor-parallel-size",
    "-pp": "pipeline-parallel-size",
    "-sc": "speculative-config",
    "-q": "quantization",
    "-dp": "data-parallel-size",
    "-cc": "compilation-config",
}


def parse_vllm_argv(argv: list[str]) -> dict[str, Any]:
    """`vllm serve` flags as written on a command line -> {name: value} (vLLM names without dashes).

    `--x v`, `--x=v`, bare booleans (`--language-model-only`), `--no-x` (False), vLLM's short aliases
    (`-tp 2`); JSON values (`--speculative-config '{...}'`) become objects. Unknown flags are kept so that
    they pass through to the emitted command line.
    """
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in _SHORT:
            token = "--" + _SHORT[token]
        if not token.startswith("--") or token == "--":
            raise ServetuneError(
                f"unexpected argument {token!r}", "write vLLM flags as --name value (e.g. --max-model-len 32K)"
            )
        name, eq, value = token[2:].partition("=")
        name = flag_key(name)
        if not name:
            raise ServetuneError(f"unexpected argument {token!r}", "write vLLM flags as --name value")
        if eq:
            flags[name] = _json_or_text(value)
        elif name in BOOL_FLAGS:
            if name.startswith("no-"):
                flags[name[3:]] = False
            else:
                flags[name] = True
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[name] = _json_or_text(argv[i + 1])
            i += 1
        elif name.startswith("no-"):
            flags[name[3:]] = False
        else:
            flags[name] = True
        i += 1
    return flags


def _json_or_text(value: str) -> Any:
    text = value.strip()
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise ServetuneError(
                f"flag value is not valid JSON: {value!r}",
                """quote it for the shell, e.g. '{"method": "mtp", "num_speculative_tokens": 2}'""",
            ) from err
    return value
