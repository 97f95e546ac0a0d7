"""Proof that an engine applied the flags it was given, read from its own startup log.

An engine may take a flag and run with another value: vLLM sets a hybrid model's attention block size itself
(784 tokens on Qwen3.6-27B, whatever `--block-size` said) and fits `--max-model-len` down to its memory;
llama.cpp pads a context to a multiple of 256 tokens (`-c 1000` runs with 1024). A tuning variant measured under a
value it did not ask for measures the wrong thing, and a report would credit the flag with it. So every launch
is checked before it is measured:

- the effective values the engine logs: vLLM's engine config line (`kv_cache_dtype`, `enable_prefix_caching`,
  `enable_chunked_prefill`, `max_seq_len`), "Chunked prefill is enabled with max_num_batched_tokens=N", "Setting
  attention block size to N tokens"; llama.cpp's context (`n_ctx`, or its slots × each slot's context) and
  its slots;
- for any other vLLM flag, its "non-default args" line: the value vLLM's argument parser received (a flag it
  lacks there holds vLLM's default; the log cannot say more).

A value the log contradicts fails the launch as `flag_not_applied`, naming the flag, the value asked for, the
value the engine runs with and the log line that says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import EngineLaunchError, FailureInfo

FLAG_NOT_APPLIED = "flag_not_applied"
"""The failure class of a launch whose log contradicts a requested flag."""

Effective = Callable[[EngineFacts], tuple[object, str] | None]
"""A flag's effective value in the facts, with the log line it comes from (None: the log did not say)."""


def _fact(attribute: str, line: Callable[[object], str]) -> Effective:
    def read(facts: EngineFacts) -> tuple[object, str] | None:
        value = getattr(facts, attribute)
        return None if value is None else (value, line(value))

    return read


VLLM_EFFECTIVE: dict[str, Effective] = {
    "max-num-batched-tokens": _fact(
        "max_num_batched_tokens", lambda v: f"Chunked prefill is enabled with max_num_batched_tokens={v}."
    ),
    "max-model-len": _fact("max_model_len", lambda v: f"engine config: max_seq_len={v}"),
    "kv-cache-dtype": _fact("kv_cache_dtype", lambda v: f"engine config: kv_cache_dtype={v}"),
    "enable-prefix-caching": _fact("enable_prefix_caching", lambda v: f"engine config: enable_prefix_caching={v}"),
    "enable-chunked-prefill": _fact("enable_chunked_prefill", lambda v: f"engine config: enable_chunked_prefill={v}"),
    "block-size": _fact("block_size", lambda v: f"Setting attention block size to {v} tokens"),
}
LLAMACPP_EFFECTIVE: dict[str, Effective] = {
    "ctx-size": _fact("n_ctx", lambda v: f"llama.cpp's context: n_ctx = {v}"),
    "parallel": _fact("n_slots", lambda v: f"initializing, n_slots = {v}"),
}
"""llama.cpp's batch sizes are not checked: under xllamacpp its log does not state them (the facts hold what it
was given)."""
AUTO_VALUES = {"ctx-size": 0, "parallel": -1, "max-model-len": -1}
"""Values that ask the engine to choose (llama.cpp's `-c 0` = the model's context, `-np -1`, vLLM's `-1`)."""


@dataclass(frozen=True)
class FlagCheck:
    """One requested flag against what the engine's log says it runs with."""

    flag: str
    requested: object
    effective: object | None
    applied: bool | None
    """True: the log shows the value; False: the log shows another; None: the log does not say."""
    evidence: str


def check_flags(config: EngineConfig, facts: EngineFacts) -> list[FlagCheck]:
    """Every flag of the config that the engine's log speaks to (vLLM and llama.cpp; none for other engines)."""
    if config.engine == "vllm":
        effective, args = VLLM_EFFECTIVE, facts.non_default_args
    elif config.engine == "llamacpp":
        effective, args = LLAMACPP_EFFECTIVE, None
    else:
        return []
    out = []
    for flag, requested in config.flags.items():
        if requested is None or AUTO_VALUES.get(flag) == requested:
            continue
        found = effective[flag](facts) if flag in effective else None
        if found is not None:
            value, line = found
            out.append(FlagCheck(flag, requested, value, _same(requested, value), line))
            continue
        if args is None:
            continue
        arg = flag.replace("-", "_")
        if arg in args:
            ok = _same(requested, args[arg])
            out.append(FlagCheck(flag, requested, args[arg], ok, f"non-default args: {arg}={args[arg]!r}"))
        else:
            out.append(FlagCheck(flag, requested, None, None, f"not in non-default args ({arg}: vLLM's default)"))
    return out


def require_applied(config: EngineConfig, facts: EngineFacts) -> dict[str, str]:
    """The evidence per checked flag (`flag: value as the log shows it`), or `EngineLaunchError`
    (`flag_not_applied`) when the log contradicts a requested value."""
    checks = check_flags(config, facts)
    wrong = [c for c in checks if c.applied is False]
    if wrong:
        raise EngineLaunchError(
            FailureInfo(
                klass="flag_not_applied",
                excerpt="\n".join(
                    f"--{c.flag} {_shown(c.requested)} was not applied: the engine runs with {_shown(c.effective)} "
                    f"({c.evidence})"
                    for c in wrong
                ),
                hint=f"the engine overrode or clamped {', '.join('--' + c.flag for c in wrong)}: measuring this "
                "variant would credit the flag with another value's figures. Use a value the engine keeps (see its "
                "log), or drop the flag from the variant",
            )
        )
    return {c.flag: ("applied" if c.applied else "not shown") + f": {c.evidence}" for c in checks}


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _same(requested: object, effective: object) -> bool:
    """A requested value and a logged one name the same setting (8192 and "8192", True and "True")."""
    if requested == effective:
        return True
    if isinstance(requested, bool) or isinstance(effective, bool):
        return str(requested).lower() == str(effective).lower()
    try:
        return math.isclose(float(str(requested)), float(str(effective)))
    except ValueError:
        return str(requested) == str(effective)
