"""`python -m servetune.engines.llamacpp_server`: llama.cpp's server (via xllamacpp) as a real process.

xllamacpp runs llama.cpp's C++ HTTP server inside a Python process; this launcher gives it llama-server's own
flag names and lifecycle (own process group, SIGTERM to stop, logs on stderr), so servetune launches, probes,
parses and tears it down exactly like a `llama-server` binary. Flags it does not know are refused (exit 2),
as llama-server would refuse them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from servetune.engines.llamacpp import LAUNCHER_PREFIX as PREFIX

_FLASH = {
    "on": "LLAMA_FLASH_ATTN_TYPE_ENABLED",
    "off": "LLAMA_FLASH_ATTN_TYPE_DISABLED",
    "auto": "LLAMA_FLASH_ATTN_TYPE_AUTO",
}


def _bool_pair(p: argparse.ArgumentParser, dest: str, on: list[str], off: list[str], default: bool | None) -> None:
    p.add_argument(*on, dest=dest, action="store_true", default=default)
    p.add_argument(*off, dest=dest, action="store_false")


def parser() -> argparse.ArgumentParser:
    """llama-server's flags that this launcher maps onto xllamacpp's CommonParams."""
    p = argparse.ArgumentParser(prog="llama-server (servetune/xllamacpp)")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-a", "--alias")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("-c", "--ctx-size", type=int)
    p.add_argument("-np", "--parallel", type=int)
    p.add_argument("-b", "--batch-size", type=int)
    p.add_argument("-ub", "--ubatch-size", type=int)
    p.add_argument("-t", "--threads", type=int)
    p.add_argument("-tb", "--threads-batch", type=int)
    p.add_argument("--threads-http", type=int)
    p.add_argument("-n", "--predict", "--n-predict", dest="n_predict", type=int)
    p.add_argument("-ngl", "--n-gpu-layers", "--gpu-layers", type=int)
    p.add_argument("-ctk", "--cache-type-k")
    p.add_argument("-ctv", "--cache-type-v")
    p.add_argument("-fa", "--flash-attn", choices=sorted(_FLASH))
    p.add_argument("--cache-reuse", type=int)
    p.add_argument("-cram", "--cache-ram", type=int)
    p.add_argument("--chat-template")
    p.add_argument("--api-key")
    p.add_argument("-s", "--seed", type=int)
    p.add_argument("--temp", type=float)
    p.add_argument("--timeout", type=int)
    p.add_argument("--jinja", action="store_true", default=None)
    _bool_pair(p, "metrics", ["--metrics"], ["--no-metrics"], None)
    _bool_pair(p, "slots", ["--slots"], ["--no-slots"], None)
    _bool_pair(p, "cont_batching", ["-cb", "--cont-batching"], ["-nocb", "--no-cont-batching"], None)
    _bool_pair(p, "warmup", ["--warmup"], ["--no-warmup"], None)
    _bool_pair(p, "kv_unified", ["-kvu", "--kv-unified"], ["--no-kv-unified"], None)
    _bool_pair(p, "cache_prompt", ["--cache-prompt"], ["--no-cache-prompt"], None)
    _bool_pair(p, "context_shift", ["--context-shift"], ["--no-context-shift"], None)
    return p


def _params(args: argparse.Namespace) -> Any:  # xllamacpp.CommonParams (untyped)
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    if args.alias:
        p.model_alias = {args.alias}
    simple = {
        "ctx_size": "n_ctx",
        "parallel": "n_parallel",
        "batch_size": "n_batch",
        "ubatch_size": "n_ubatch",
        "n_predict": "n_predict",
        "n_gpu_layers": "n_gpu_layers",
        "cache_reuse": "n_cache_reuse",
        "cache_ram": "cache_ram_mib",
        "threads_http": "n_threads_http",
        "chat_template": "chat_template",
        "jinja": "use_jinja",
        "metrics": "endpoint_metrics",
        "slots": "endpoint_slots",
        "cont_batching": "cont_batching",
        "warmup": "warmup",
        "kv_unified": "kv_unified",
        "cache_prompt": "cache_prompt",
        "context_shift": "ctx_shift",
        "timeout": "timeout_read",
    }
    for arg, attr in simple.items():
        value = getattr(args, arg)
        if value is not None:
            setattr(p, attr, value)
    if args.threads is not None:
        p.cpuparams.n_threads = args.threads
        p.cpuparams_batch.n_threads = args.threads
    if args.threads_batch is not None:
        p.cpuparams_batch.n_threads = args.threads_batch
    if args.cache_type_k:
        p.cache_type_k = getattr(xlc.ggml_type, f"GGML_TYPE_{args.cache_type_k.upper()}")
    if args.cache_type_v:
        p.cache_type_v = getattr(xlc.ggml_type, f"GGML_TYPE_{args.cache_type_v.upper()}")
    if args.flash_attn:
        p.flash_attn_type = getattr(xlc.llama_flash_attn_type, _FLASH[args.flash_attn])
    if args.api_key:
        p.api_keys = [args.api_key]
    if args.seed is not None:
        p.sampling.seed = args.seed
    if args.temp is not None:
        p.sampling.temp = args.temp
    return p


def main(argv: list[str] | None = None) -> int:
    """Starts the server, prints its settings, and serves until SIGTERM/SIGINT."""
    args = parser().parse_args(argv)
    if not os.path.isfile(args.model):
        print(
            f"{PREFIX} gguf_init_from_file: failed to open GGUF file '{args.model}' (No such file or directory)",
            file=sys.stderr,
            flush=True,
        )
        return 1
    import xllamacpp as xlc

    params = _params(args)
    print(
        f"{PREFIX} xllamacpp {xlc.__version__}; n_ctx = {params.n_ctx}, n_parallel = {params.n_parallel}, "
        f"n_batch = {params.n_batch}, n_ubatch = {params.n_ubatch}, "
        f"n_threads = {params.cpuparams.n_threads}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server = xlc.Server(params)
    except RuntimeError as err:
        print(f"{PREFIX} server failed to start: {err}", file=sys.stderr, flush=True)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # after Server(): llama.cpp installs handlers of its own
        signal.signal(sig, lambda *_: stop.set())
    print(f"{PREFIX} ready on {server.listening_address}", file=sys.stderr, flush=True)
    while not stop.wait(1.0):
        pass
    print(f"{PREFIX} stopping", file=sys.stderr, flush=True)
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
