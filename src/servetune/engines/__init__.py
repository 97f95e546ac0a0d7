"""Engines room: launch, readiness, startup facts, failure classes and teardown for vLLM, llama.cpp, SGLang
and servetune's simulator.

Public API: `EngineConfig` (a leaf module everyone shares); `servetune.engines.launch.launch(cfg, log_dir=...) ->
RunningEngine` (the function is reached through its module: the package's name `launch` is that module) and
`attach`; `EngineLaunchError` (`.failure: FailureInfo`, from `classify_log`); `EngineFacts` from
`parse_vllm_log` / `parse_llamacpp_log` / `parse_sglang_log`; the one flag vocabulary (`parse_argv`, `to_argv`,
`normalize_flags`, flag tables by `table_for`) and the one command emitter (`serve_command`, `docker_command`,
`parse_command`); `resolve_model` / `resolve_tokenizer`; `adapter_for(engine) -> EngineAdapter`.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.engines.adapter import EngineAdapter as EngineAdapter
    from servetune.engines.commands import (
        Command as Command,
    )
    from servetune.engines.commands import (
        docker_command as docker_command,
    )
    from servetune.engines.commands import (
        parse_command as parse_command,
    )
    from servetune.engines.commands import (
        serve_command as serve_command,
    )
    from servetune.engines.config import EngineConfig as EngineConfig
    from servetune.engines.config import EngineName as EngineName
    from servetune.engines.config import FlagValue as FlagValue
    from servetune.engines.facts import EngineFacts as EngineFacts
    from servetune.engines.failures import (
        EngineLaunchError as EngineLaunchError,
    )
    from servetune.engines.failures import (
        FailureClass as FailureClass,
    )
    from servetune.engines.failures import (
        FailureInfo as FailureInfo,
    )
    from servetune.engines.failures import (
        classify_log as classify_log,
    )
    from servetune.engines.flagtable import FlagSpec as FlagSpec
    from servetune.engines.flagtable import FlagTable as FlagTable
    from servetune.engines.flagtable import table_for as table_for
    from servetune.engines.launch import RunningEngine as RunningEngine
    from servetune.engines.launch import attach as attach
    from servetune.engines.llamacpp import parse_llamacpp_log as parse_llamacpp_log
    from servetune.engines.models import resolve_model as resolve_model
    from servetune.engines.models import resolve_tokenizer as resolve_tokenizer
    from servetune.engines.registry import adapter_for as adapter_for
    from servetune.engines.sglang import parse_sglang_log as parse_sglang_log
    from servetune.engines.vllm import parse_vllm_log as parse_vllm_log
    from servetune.engines.vocab import normalize_flags as normalize_flags
    from servetune.engines.vocab import parse_argv as parse_argv
    from servetune.engines.vocab import to_argv as to_argv
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
            "adapter_for": "registry",
            "attach": "launch",
            "classify_log": "failures",
            "docker_command": "commands",
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
