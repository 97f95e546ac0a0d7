"""engines room: launching vLLM, llama.cpp, SGLang and servetune's simulator, and the one vocabulary of their flags.

Entry points: `EngineConfig`; `servetune.engines.launch.launch(cfg, log_dir=...) -> RunningEngine` (reached by its
module, whose name it shares) and `attach`; `EngineLaunchError`; `parse_argv` / `to_argv` / `normalize_flags`;
`serve_command` / `docker_command` -> `Command`; `resolve_model`; `adapter_for(engine)`.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.engines.adapter import EngineAdapter as EngineAdapter
    from servetune.engines.commands import (
        Command as Command,
        docker_command as docker_command,
        parse_command as parse_command,
        serve_command as serve_command,
    )
    from servetune.engines.config import EngineConfig as EngineConfig, EngineName as EngineName, FlagValue as FlagValue
    from servetune.engines.facts import EngineFacts as EngineFacts
    from servetune.engines.failures import (
        EngineLaunchError as EngineLaunchError,
        FailureClass as FailureClass,
        FailureInfo as FailureInfo,
        classify_log as classify_log,
    )
    from servetune.engines.flagtable import FlagSpec as FlagSpec, FlagTable as FlagTable, table_for as table_for
    from servetune.engines.launch import RunningEngine as RunningEngine, attach as attach
    from servetune.engines.llamacpp import parse_llamacpp_log as parse_llamacpp_log
    from servetune.engines.models import resolve_model as resolve_model, resolve_tokenizer as resolve_tokenizer
    from servetune.engines.registry import adapter_for as adapter_for
    from servetune.engines.sglang import parse_sglang_log as parse_sglang_log
    from servetune.engines.sim import SimAdapter as SimAdapter
    from servetune.engines.vllm import parse_vllm_log as parse_vllm_log
    from servetune.engines.vocab import (
        human_readable_int as human_readable_int,
        normalize_flags as normalize_flags,
        parse_argv as parse_argv,
        to_argv as to_argv,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Command": "commands",
            "EngineAdapter": "adapter",
            "EngineConfig": "config",
            "EngineFacts": "facts",
            "EngineLaunchError": "failures",
            "EngineName": "config",
            "FailureClass": "failures",
            "FailureInfo": "failures",
            "FlagSpec": "flagtable",
            "FlagTable": "flagtable",
            "FlagValue": "config",
            "RunningEngine": "launch",
            "SimAdapter": "sim",
            "adapter_for": "registry",
            "attach": "launch",
            "classify_log": "failures",
            "docker_command": "commands",
            "human_readable_int": "vocab",
            "normalize_flags": "vocab",
            "parse_argv": "vocab",
            "parse_command": "commands",
            "parse_llamacpp_log": "llamacpp",
            "parse_sglang_log": "sglang",
            "parse_vllm_log": "vllm",
            "resolve_model": "models",
            "resolve_tokenizer": "models",
            "serve_command": "commands",
            "table_for": "flagtable",
            "to_argv": "vocab",
        },
    )
