"""The engine command line, in one place (today the engine adapters' `argv`; later `engines.commands`).

`servetune serve` never builds an engine command itself: it calls `launch()`, which asks the adapter.  The
deployment files need the same command split into program and arguments (a container image brings its own
program), so that split lives here, behind one function, for the spine's `engines.commands` to replace.
"""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.engines.registry import adapter_for


def engine_args(cfg: EngineConfig, host: str, port: int) -> list[str]:
    """The engine's arguments without its program: what a container image's entrypoint is given.

    vLLM: `--model M --served-model-name N --host H --port P <flags>`; llama.cpp: `-m M --alias N ... <flags>`.
    """
    argv = adapter_for(cfg.engine).argv(cfg, host, port)
    for marker in ("--model", "-m"):
        if marker in argv:
            return argv[argv.index(marker) :]
    if "serve" in argv:  # `vllm serve MODEL ...`
        return ["--model", *argv[argv.index("serve") + 1 :]]
    return argv[1:]
