"""llama.cpp's `llama-server`: argv with its flag names, log facts (slots, context per slot, batches), failures.

The server is either a `llama-server` binary (SERVETUNE_LLAMA_SERVER=path, or on PATH when xllamacpp is not
installed) or servetune's xllamacpp launcher (`python -m servetune.engines.llamacpp_server`), which takes the
same flags and prints the same log lines.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence

from servetune.engines.adapter import EngineAdapter, Image, installed_version, last_int
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import Pattern, pattern
from servetune.errors import ServetuneError

LAUNCHER_PREFIX = "servetune-llamacpp:"
"""The xllamacpp launcher's own lines (`engines/llamacpp_server.py`): what it was asked, not what llama.cpp did."""

_R = {
    name: re.compile(rx, re.MULTILINE)
    for name, rx in {
        "slots": r"initializing, n_slots = (\d+), n_ctx_slot = (\d+)",
        "unified": r"initializing, n_slots = \d+, n_ctx_slot = \d+, kv_unified = '(true|false)'",
        "slots_old": r"new slot,? n_ctx_slot = (\d+)",
        "n_slots_old": r"initializing slots, n_slots = (\d+)",
        "n_ctx": r"(?:llama_context: |\b)n_ctx\s*=\s*(\d+)",
        "n_batch": r"\bn_batch\s*=\s*(\d+)",
        "n_ubatch": r"\bn_ubatch\s*=\s*(\d+)",
        "version_build": r"build(?:_info)?: (?:b)?(\d+)[ -]",
        "version_xll": r"xllamacpp (\S+?);",
    }.items()
}

LLAMACPP_PATTERNS: tuple[Pattern, ...] = (
    pattern(
        "model_missing",
        r".*(?:failed to open GGUF file|gguf_init_from_file.*No such file or directory).*",
        "The GGUF file does not exist: check the model path (llama.cpp takes a .gguf file, not a directory).",
    ),
    pattern(
        "unsupported_model",
        r".*(?:unknown model architecture|unknown (?:pre-)?tokenizer|unsupported model|"
        r"invalid magic|not a GGUF file|unknown type).*",
        "This llama.cpp build cannot load this GGUF (architecture, tokenizer or tensor type unknown): use a "
        "newer llama.cpp or convert the model again.",
    ),
    pattern(
        "kv_too_small",
        r".*(?:failed to allocate buffer for kv cache|failed to initialize the context|"
        r"llama_init_from_model: failed).*",
        "The context does not fit: lower --ctx-size (-c) or --parallel, or quantize the KV cache "
        "(--cache-type-k/--cache-type-v q8_0).",
    ),
    pattern(
        "weights_oom",
        r".*(?:out of memory|failed to allocate .* buffer|unable to allocate).*",
        "The model does not fit in memory: offload fewer layers (-ngl), use a smaller quantization, or free memory.",
    ),
    pattern(
        "invalid_flag",
        r".*(?:error: unrecognized arguments|error: argument|error: invalid argument|unknown argument).*",
        "llama-server rejected a flag: check its name against `llama-server --help` (servetune passes flags "
        "through by name).",
    ),
)

_PROGRESS = tuple(
    re.compile(rx)
    for rx in (
        r"loading model",
        r"n_slots = ",
        r"model loaded",
        r"listening on",
        r"ready on",
        r"n_ctx = ",
    )
)


def llamacpp_command() -> list[str]:
    """SERVETUNE_LLAMA_SERVER (a binary) wins; else the xllamacpp launcher; else `llama-server` on PATH."""
    explicit = os.environ.get("SERVETUNE_LLAMA_SERVER")
    if explicit:
        return [explicit]
    if installed_version("xllamacpp") is not None:
        return [sys.executable, "-m", "servetune.engines.llamacpp_server"]
    exe = shutil.which("llama-server")
    if exe:
        return [exe]
    raise ServetuneError(
        "no llama.cpp server found (neither xllamacpp nor a llama-server binary)",
        "pip install 'servetune[engines]' (brings xllamacpp), or set SERVETUNE_LLAMA_SERVER=/path/to/llama-server",
    )


class LlamaCppAdapter(EngineAdapter):
    """llama.cpp's HTTP server."""

    name = "llamacpp"
    progress_patterns = _PROGRESS

    shell_program: tuple[str, ...] = ("llama-server",)
    image_program: tuple[str, ...] = ("/app/llama-server",)
    """The server images' own entrypoint (ghcr.io/ggml-org/llama.cpp:server-*)."""
    model_flag = "-m"
    name_flag = "--alias"

    def program(self) -> list[str]:
        return llamacpp_command()

    def image(self, version: str | None, gpus: int) -> Image:
        """llama.cpp's server image of the build (`server-b11549`; `server-cuda-b11549` with GPUs)."""
        return self.pinned(
            "ghcr.io/ggml-org/llama.cpp", "server-cuda-{release}" if gpus else "server-{release}", version
        )

    def version(self) -> str | None:
        if os.environ.get("SERVETUNE_LLAMA_SERVER"):
            return None  # a binary says its build in its log (`build_info`)
        v = installed_version("xllamacpp")
        return f"xllamacpp-{v}" if v else None

    def parse_log(self, text: str) -> EngineFacts:
        return parse_llamacpp_log(text)

    def failure_patterns(self) -> Sequence[Pattern]:
        return LLAMACPP_PATTERNS


def parse_llamacpp_log(text: str) -> EngineFacts:
    """Slots, context per slot and batch sizes from a llama-server (or launcher) log. The context is llama.cpp's
    own (its `llama_context: n_ctx` line, else its slots times the context of each, or one slot's when the KV cache
    is unified), never the launcher's echo of what it was asked: llama.cpp pads a context to a multiple of 256
    (`-c 1000` runs with 1024). The batch sizes fall back to that echo when llama.cpp does not log them
    (xllamacpp), so they are what it was given there."""
    own = "\n".join(line for line in text.splitlines() if not line.startswith(LAUNCHER_PREFIX))
    slots = _R["slots"].findall(text)
    n_slots = int(slots[-1][0]) if slots else last_int(_R["n_slots_old"], text)
    per_slot = int(slots[-1][1]) if slots else last_int(_R["slots_old"], text)
    xll = _R["version_xll"].findall(text)
    build = _R["version_build"].findall(text)
    version = f"xllamacpp-{xll[-1]}" if xll else (f"b{build[-1]}" if build and build[-1] != "0" else None)
    n_ctx = last_int(_R["n_ctx"], own)
    if n_ctx is None and n_slots and per_slot:
        unified = _R["unified"].findall(text)
        n_ctx = per_slot if unified and unified[-1] == "true" else n_slots * per_slot
    return EngineFacts(
        engine="llamacpp",
        version=version,
        n_ctx=n_ctx,
        n_slots=n_slots,
        n_ctx_per_slot=per_slot,
        max_model_len=per_slot,
        n_batch=last_int(_R["n_batch"], text),
        n_ubatch=last_int(_R["n_ubatch"], text),
    )
