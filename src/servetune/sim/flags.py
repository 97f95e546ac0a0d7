"""`sim-serve`'s (and `estimate`'s) command line: read by the one engine vocabulary with the `sim` flag table —
every `vllm serve` flag of the imitated release plus the simulator's own (`--gpu`, `--time-scale`,
`--calibration`, `--acceptance-rate`, `--vllm-version`, `--seed`) — so a variant written for `vllm serve` runs
unchanged and `plan`, `estimate`, `sim-serve` and `tune` read one argv the same way.

A flag no table knows is an error with a suggestion, unless the caller opts in (`--pass-unknown-flags`, or a
measured run's flags, which a real vLLM already accepted); vLLM flags the simulator does not model are accepted
and named, one log line each, in the startup log.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from servetune.engines.flagtable import table_for
from servetune.engines.vocab import parse_argv, to_argv
from servetune.errors import ServetuneError, from_validation_error
from servetune.hardware.gpus import parse_gpu_arg
from servetune.plan.placement import place
from servetune.plan.target import Target, resolve_target


class SimServeArgs(BaseModel):
    """What `sim-serve` was asked for, in vLLM's terms (None = vLLM's default for the GPU and model)."""

    model_config = ConfigDict(frozen=True)

    model: str
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    tensor_parallel_size: int = Field(1, ge=1, le=4096)
    max_model_len: int | None = None
    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    kv_cache_dtype: str = "auto"
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool = True
    async_scheduling: bool | None = None
    block_size: int | None = Field(None, ge=1)
    long_prefill_token_threshold: int = Field(0, ge=0)
    num_speculative_tokens: int = Field(0, ge=0)
    speculative_method: str | None = None
    acceptance_rate: float = Field(
        0.8, ge=0, le=1, allow_inf_nan=False, description="Share of draft tokens accepted (speculative decoding)."
    )
    language_model_only: bool = False
    quantization: str | None = None
    dtype: str | None = None
    enforce_eager: bool = False
    planner_flags: dict[str, str | int] = Field(
        default_factory=dict, description="Other vLLM flags that change the memory ledger, passed to the planner."
    )
    gpu: str = Field("H200", description="The GPU as `--gpu` names it (hardware.gpus.parse_gpu_arg's syntax).")
    time_scale: float = Field(1.0, gt=0, allow_inf_nan=False, description="Simulated seconds per wall second.")
    calibration: str | None = Field(None, description="A calibration profile (JSON) from `servetune calibrate`.")
    vllm_version: str | None = Field(None, description="vLLM release whose ledger and defaults to follow.")
    seed: int = Field(0, ge=0, description="Seed of the simulated sampling (estimate: the workload's, as in bench).")
    ignored: list[str] = Field(default_factory=list)

    @field_validator("max_model_len")
    @classmethod
    def _length(cls, value: int | None) -> int | None:
        if value is not None and value != -1 and value < 1:
            raise ValueError("must be positive (or -1: fit the KV cache)")
        return value


_LEDGER_FLAGS = (
    "kv-cache-memory-bytes",
    "num-gpu-blocks-override",
    "mamba-cache-dtype",
    "mamba-ssm-cache-dtype",
    "max-cudagraph-capture-size",
)
"""vLLM flags the simulator does not use itself but the planner's ledger does."""

SIM_ONLY_FLAGS: tuple[str, ...] = tuple(spec.name for spec in table_for("sim").flags if spec.sim_only)
"""Flags only `sim-serve` takes (EngineConfig names; the `sim` flag table says which): the emitter strips them
when a simulated variant becomes the `vllm serve` it imitates."""

_FIELDS = {
    "tensor-parallel-size": "tensor_parallel_size",
    "max-model-len": "max_model_len",
    "max-num-seqs": "max_num_seqs",
    "max-num-batched-tokens": "max_num_batched_tokens",
    "gpu-memory-utilization": "gpu_memory_utilization",
    "kv-cache-dtype": "kv_cache_dtype",
    "enable-prefix-caching": "enable_prefix_caching",
    "enable-chunked-prefill": "enable_chunked_prefill",
    "async-scheduling": "async_scheduling",
    "block-size": "block_size",
    "long-prefill-token-threshold": "long_prefill_token_threshold",
    "language-model-only": "language_model_only",
    "quantization": "quantization",
    "dtype": "dtype",
    "enforce-eager": "enforce_eager",
    "time-scale": "time_scale",
    "calibration": "calibration",
    "vllm-version": "vllm_version",
    "seed": "seed",
}
"""The flags the simulator models, and the SimServeArgs field each sets."""
_SERVING = ("model", "served-model-name", "host", "port")
OPT_IN = "--pass-unknown-flags"
"""sim-serve's opt-in word for flags no table knows (as `plan`, `launch`, `check` spell it)."""


def parse_sim_args(argv: list[str], *, allow_unknown: bool = False) -> SimServeArgs:
    """Reads vLLM-style argv (`MODEL [flags]`, or `--model MODEL`). A flag no table knows is an error naming it,
    unless `--pass-unknown-flags` is among the words or `allow_unknown` (a caller holding flags a real vLLM
    already accepted, e.g. a measured run's flags.txt); it is then named in the startup log like every vLLM flag
    the simulator does not model."""
    words, opted_in, model_pos = _words(argv)
    return sim_args(parse_argv("sim", words, allow_unknown=allow_unknown or opted_in), model=model_pos)


def sim_target(argv: list[str], *, allow_unknown: bool = False) -> Target:
    """What `sim-serve` / `estimate` read from their words, as `--show-config` prints it (plan's format)."""
    words, opted_in, model_pos = _words(argv)
    return resolve_target(engine="sim", model=model_pos, argv=words, allow_unknown=allow_unknown or opted_in)


def _words(argv: list[str]) -> tuple[list[str], bool, str | None]:
    """(flag words, opted in to unknown flags, the positional MODEL)."""
    words = list(argv)
    opted_in = OPT_IN in words or "--allow-unknown-flags" in words
    words = [w for w in words if w not in (OPT_IN, "--allow-unknown-flags")]
    model_pos = words.pop(0) if words and not words[0].startswith("-") else None
    return words, opted_in, model_pos


def sim_args(given: Mapping[str, object], *, model: str | None = None) -> SimServeArgs:
    """SimServeArgs from flags already read by the vocabulary (canonical names, typed values): the one mapping of
    vLLM and sim flags onto what the simulator models, for argv and for EngineConfigs alike."""
    flags = {k: v for k, v in given.items() if v is not None}
    served = flags.pop("served-model-name", None)
    values: dict[str, Any] = {
        "model": flags.pop("model", None) or model,
        "served_model_name": (served[0] if isinstance(served, list) and served else served) or None,
        "host": flags.pop("host", None) or "127.0.0.1",
        "port": flags.pop("port", None) or 8000,
    }
    if not values["model"]:
        raise ServetuneError("sim-serve needs a model (a directory or config.json)", "pass it first: sim-serve MODEL")
    for flag, field in _FIELDS.items():
        if flags.get(flag) is not None:
            values[field] = flags.pop(flag)
    spec_tokens, method, acceptance = _speculative(flags.pop("speculative-config", None))
    rate = flags.pop("acceptance-rate", None)
    values.update(num_speculative_tokens=spec_tokens, speculative_method=method, acceptance_rate=acceptance)
    if rate is not None:
        values["acceptance_rate"] = rate
    gpu_text = str(flags.pop("gpu", None) or "H200")
    placed = place(parse_gpu_arg(gpu_text), given)
    if placed.problem:
        raise ServetuneError(
            f"{placed.problem} (--gpu {gpu_text})",
            f"give --gpu {placed.gpu.name}x{placed.world_size}, or smaller parallel sizes",
        )
    values["tensor_parallel_size"] = placed.tensor_parallel_size
    values["gpu"] = gpu_text
    values["planner_flags"] = {f: flags.pop(f) for f in _LEDGER_FLAGS if flags.get(f) is not None}
    values["ignored"] = [" ".join(to_argv("sim", {k: v})) for k, v in flags.items() if v is not None]
    try:
        return SimServeArgs(**values)
    except ValidationError as err:
        raise from_validation_error(err, name=_flag_of) from None


def _flag_of(field: str) -> str:
    """The flag that sets a SimServeArgs field."""
    return "--" + next((k for k, v in _FIELDS.items() if v == field), field.replace("_", "-"))


def _speculative(config: object) -> tuple[int, str | None, float]:
    """(draft tokens, method, acceptance rate) from `--speculative-config` (a JSON object, read by the vocabulary)."""
    if config is None:
        return 0, None, 0.8
    fix = 'write e.g. \'{"method":"mtp","num_speculative_tokens":2}\''
    if not isinstance(config, dict):
        raise ServetuneError("--speculative-config must be a JSON object", fix)
    try:
        tokens = int(config.get("num_speculative_tokens", 0))
        acceptance = float(config.get("acceptance_rate", 0.8))
    except (TypeError, ValueError):
        raise ServetuneError(
            "--speculative-config: num_speculative_tokens and acceptance_rate must be numbers", fix
        ) from None
    if not math.isfinite(acceptance):
        raise ServetuneError(f"--speculative-config: acceptance_rate {acceptance} is not a probability", fix)
    method = config.get("method")
    return tokens, str(method) if method is not None else None, acceptance
