"""`sim-serve`'s (and `estimate`'s) command line: vLLM's own flag names (so one EngineConfig launches either),
plus a few simulator-only flags (`--gpu`, `--time-scale`, `--calibration`, `--acceptance-rate`, ...).

A flag the simulator does not know is an error with a suggestion (`--tp` is not vLLM's spelling of `-tp`): a
flag dropped without a word would simulate another deployment than the one asked for. vLLM flags that change
nothing the simulator computes (API-server, logging and loading flags such as `--reasoning-parser`) are
accepted and named in the startup log, so a variant written for `vllm serve` runs unchanged; anything else
passes only with the explicit opt-in `--allow-unknown-flags` (then it is named in the log too). This parser is
kept small on purpose: the shared engine vocabulary (`servetune.engines`) is to replace it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from servetune.errors import ServetuneError
from servetune.hardware.gpus import parse_gpu_arg
from servetune.plan.inputs import human_readable_int


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
    acceptance_rate: float = Field(0.8, ge=0, le=1, allow_inf_nan=False)
    language_model_only: bool = False
    quantization: str | None = None
    dtype: str | None = None
    enforce_eager: bool = False
    planner_flags: dict[str, str | int] = Field(
        default_factory=dict, description="Other vLLM flags that change the memory ledger, passed to the planner."
    )
    gpu: str = Field("H200", description="The GPU as `--gpu` names it (hardware.gpus.parse_gpu_arg's syntax).")
    time_scale: float = Field(1.0, gt=0, allow_inf_nan=False, description="Simulated seconds per wall second.")
    calibration: str | None = None
    vllm_version: str | None = Field(None, description="vLLM release whose ledger and defaults to follow.")
    seed: int = Field(0, ge=0)
    ignored: list[str] = Field(default_factory=list)

    @field_validator("max_model_len")
    @classmethod
    def _length(cls, value: int | None) -> int | None:
        if value is not None and value != -1 and value < 1:
            raise ValueError("must be positive (or -1: fit the KV cache)")
        return value


_LEDGER_FLAGS = {
    "kv-cache-memory-bytes": int,
    "num-gpu-blocks-override": int,
    "mamba-cache-dtype": str,
    "mamba-ssm-cache-dtype": str,
    "max-cudagraph-capture-size": int,
}
"""vLLM flags the simulator does not use itself but the planner's ledger does."""

UNMODELLED_VALUE_FLAGS = (
    "reasoning-parser",
    "tool-call-parser",
    "chat-template",
    "load-format",
    "download-dir",
    "tokenizer",
    "revision",
    "generation-config",
    "uvicorn-log-level",
    "api-key",
    "allowed-local-media-path",
    "distributed-executor-backend",
)
UNMODELLED_BOOL_FLAGS = (
    "trust-remote-code",
    "enable-auto-tool-choice",
    "disable-log-requests",
    "enable-log-requests",
    "disable-log-stats",
    "disable-uvicorn-access-log",
)
"""vLLM flags that change nothing the simulator computes (parsing, logging, loading, the API surface): accepted
and named in the startup log."""

SIM_ONLY_FLAGS = ("gpu", "time-scale", "calibration", "acceptance-rate", "vllm-version", "seed", "allow-unknown-flags")
"""Flags only `sim-serve` takes (EngineConfig names): strip them when turning a sim variant into `vllm serve`."""

_FIELD_FLAGS = {"planner_flags": "--num-gpu-blocks-override / --kv-cache-memory-bytes / ..."}


class _Parser(argparse.ArgumentParser):
    """argparse that raises a `ServetuneError` (error + fix, exit code 2 at the CLI) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise ServetuneError(f"{self.prog}: {message}", "see `servetune sim-serve --help` for the flags it reads")


def _parser() -> _Parser:
    p = _Parser(prog="servetune sim-serve", add_help=False, allow_abbrev=False)
    p.add_argument("model_pos", nargs="?", metavar="MODEL", help="model directory with config.json")
    p.add_argument("--model")
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--tensor-parallel-size", "-tp", type=int)
    p.add_argument("--max-model-len")
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--gpu-memory-utilization", type=float)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--block-size", type=int)
    p.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--long-prefill-token-threshold", type=int, default=0)
    p.add_argument("--speculative-config", "-sc")
    p.add_argument("--language-model-only", action="store_true")
    p.add_argument("--quantization", "-q")
    p.add_argument("--dtype")
    p.add_argument("--enforce-eager", action="store_true")
    for flag, kind in _LEDGER_FLAGS.items():
        p.add_argument(f"--{flag}", type=kind, dest=f"ledger_{flag.replace('-', '_')}")
    for flag in UNMODELLED_VALUE_FLAGS:
        p.add_argument(f"--{flag}", dest=f"unmodelled_{flag.replace('-', '_')}")
    for flag in UNMODELLED_BOOL_FLAGS:
        p.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, dest=f"unmodelled_{flag.replace('-', '_')}")
    p.add_argument("--gpu", default="H200", help="GPU and count, e.g. H200 or A100-80G-SXMx2 (sim only)")
    p.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds per wall second (sim only)")
    p.add_argument("--calibration", help="calibration profile JSON from `servetune calibrate` (sim only)")
    p.add_argument("--acceptance-rate", type=float, help="speculative per-token acceptance (sim only)")
    p.add_argument("--vllm-version", help="vLLM release to imitate, e.g. 0.24.0 (sim only; default latest)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--allow-unknown-flags", action="store_true", help="run with flags it does not know (sim only)")
    return p


def flag_names() -> list[str]:
    """Every option string the simulator reads (for help texts and suggestions)."""
    return [s for action in _parser()._actions for s in action.option_strings]


def parse_sim_args(argv: list[str], *, allow_unknown: bool = False) -> SimServeArgs:
    """Parses vLLM-style argv. An unknown flag is an error naming it, unless `--allow-unknown-flags` is among the
    flags or `allow_unknown` (a caller holding flags that a real vLLM already accepted, e.g. a measured run's
    flags.txt): then it is kept in `ignored` for the startup log."""
    ns, unknown = _parser().parse_known_args(argv)
    if unknown and not (allow_unknown or ns.allow_unknown_flags):
        raise _unknown(unknown)
    model = ns.model or ns.model_pos
    if not model:
        raise ServetuneError("sim-serve needs a model (a directory or config.json)", "pass it first: sim-serve MODEL")
    spec_tokens, method, acceptance = _speculative(ns.speculative_config)
    if ns.acceptance_rate is not None:
        acceptance = ns.acceptance_rate
    gpu, count = parse_gpu_arg(ns.gpu)
    tp = ns.tensor_parallel_size
    if count > 1 and tp is not None and tp != count:
        raise ServetuneError(
            f"--gpu {ns.gpu} names {count} GPUs but --tensor-parallel-size is {tp}",
            f"the simulator runs one replica of TP GPUs: give --gpu {gpu.name}x{tp}, or leave out one of the two",
        )
    unmodelled = [
        f"--{flag} {value}" for flag in UNMODELLED_VALUE_FLAGS if (value := _unmodelled(ns, flag)) is not None
    ] + [
        f"--{'' if value else 'no-'}{flag}"
        for flag in UNMODELLED_BOOL_FLAGS
        if (value := _unmodelled(ns, flag)) is not None
    ]
    values: dict[str, Any] = dict(
        model=model,
        served_model_name=ns.served_model_name[0] if ns.served_model_name else None,
        host=ns.host,
        port=ns.port,
        tensor_parallel_size=tp if tp is not None else count,
        max_model_len=human_readable_int(ns.max_model_len, "max-model-len") if ns.max_model_len else None,
        max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        kv_cache_dtype=ns.kv_cache_dtype,
        enable_prefix_caching=ns.enable_prefix_caching,
        enable_chunked_prefill=ns.enable_chunked_prefill,
        async_scheduling=ns.async_scheduling,
        block_size=ns.block_size,
        long_prefill_token_threshold=ns.long_prefill_token_threshold,
        num_speculative_tokens=spec_tokens,
        speculative_method=method,
        acceptance_rate=acceptance,
        language_model_only=ns.language_model_only,
        quantization=ns.quantization,
        dtype=ns.dtype,
        enforce_eager=ns.enforce_eager,
        planner_flags={f: v for f in _LEDGER_FLAGS if (v := getattr(ns, f"ledger_{f.replace('-', '_')}")) is not None},
        gpu=ns.gpu,
        time_scale=ns.time_scale,
        calibration=ns.calibration,
        vllm_version=ns.vllm_version,
        seed=ns.seed,
        ignored=unmodelled + _pair_flags(unknown),
    )
    try:
        return SimServeArgs(**values)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        flag = _FIELD_FLAGS.get(field, "--" + field.replace("_", "-"))
        raise ServetuneError(
            f"{flag}: {first['msg'][0].lower()}{first['msg'][1:]} (got {first.get('input')!r})",
            f"give a valid value for {flag}",
        ) from None


def _unmodelled(ns: argparse.Namespace, flag: str) -> Any:
    return getattr(ns, f"unmodelled_{flag.replace('-', '_')}")


def _speculative(text: str | None) -> tuple[int, str | None, float]:
    """(draft tokens, method, acceptance rate) from `--speculative-config` JSON."""
    if not text:
        return 0, None, 0.8
    fix = 'write e.g. \'{"method":"mtp","num_speculative_tokens":2}\''
    try:
        sc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ServetuneError(f"--speculative-config is not JSON: {err}", fix) from None
    if not isinstance(sc, dict):
        raise ServetuneError("--speculative-config must be a JSON object", fix)
    try:
        tokens = int(sc.get("num_speculative_tokens", 0))
        acceptance = float(sc.get("acceptance_rate", 0.8))
    except (TypeError, ValueError):
        raise ServetuneError(
            "--speculative-config: num_speculative_tokens and acceptance_rate must be numbers", fix
        ) from None
    if not math.isfinite(acceptance):
        raise ServetuneError(f"--speculative-config: acceptance_rate {acceptance} is not a probability", fix)
    method = sc.get("method")
    return tokens, str(method) if method is not None else None, acceptance


def _unknown(words: list[str]) -> ServetuneError:
    """The error for flags the simulator does not read, with the closest flag it does."""
    flags = [w.split("=", 1)[0] for w in words if w.startswith("-")]
    if not flags:
        return ServetuneError(f"unexpected argument {words[0]!r}", "give the model first, then flags as --name value")
    known = flag_names()
    hints = []
    for flag in flags:
        alias = flag[1:] if flag.startswith("--") else None  # `--tp` for vLLM's `-tp`
        if alias in known:
            long = next(s for a in _parser()._actions if alias in a.option_strings for s in a.option_strings)
            hints.append(f"{flag}: did you mean {long} ({alias})?")
        elif close := difflib.get_close_matches(flag, known, n=1, cutoff=0.7):
            hints.append(f"{flag}: did you mean {close[0]}?")
    return ServetuneError(
        f"unknown flag{'s' if len(flags) > 1 else ''} {', '.join(flags)} (the simulator reads vLLM's flags)",
        " ".join([*hints, "Pass --allow-unknown-flags to simulate without them (they are named in the log)."]),
    )


def _pair_flags(words: list[str]) -> list[str]:
    """Unknown argv words as `--flag value` items, for one log line per ignored flag."""
    out: list[str] = []
    for word in words:
        if out and out[-1].startswith("-") and " " not in out[-1] and not word.startswith("-"):
            out[-1] = f"{out[-1]} {word}"
        else:
            out.append(word)
    return out
