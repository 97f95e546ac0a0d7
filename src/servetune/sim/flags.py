"""`sim-serve`'s command line: vLLM's own flag names (so one EngineConfig launches either), plus a few
simulator-only flags (`--gpu`, `--time-scale`, `--calibration`, `--acceptance-rate`).

Flags vLLM has but the simulator does not model are accepted and named in a log line, never an error,
so a variant written for real vLLM runs unchanged against the simulator.
"""

from __future__ import annotations

import argparse
import json

from pydantic import BaseModel, ConfigDict, Field

from servetune.errors import ServetuneError
from servetune.engines.vocab import human_readable_int


class SimServeArgs(BaseModel):
    """What `sim-serve` was asked for, in vLLM's terms (None = vLLM's default for the GPU and model)."""

    model_config = ConfigDict(frozen=True)

    model: str
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str = "auto"
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool = True
    async_scheduling: bool | None = None
    block_size: int | None = None
    long_prefill_token_threshold: int = 0
    num_speculative_tokens: int = 0
    speculative_method: str | None = None
    acceptance_rate: float = 0.8
    language_model_only: bool = False
    quantization: str | None = None
    dtype: str | None = None
    enforce_eager: bool = False
    planner_flags: dict[str, str | int] = Field(
        default_factory=dict, description="Other vLLM flags that change the memory ledger, passed to the planner."
    )
    gpu: str = "H200"
    time_scale: float = Field(1.0, gt=0, description="Simulated seconds per wall second.")
    calibration: str | None = None
    vllm_version: str | None = Field(None, description="vLLM release whose ledger and defaults to follow.")
    seed: int = 0
    ignored: list[str] = Field(default_factory=list)


_LEDGER_FLAGS = {
    "kv-cache-memory-bytes": int,
    "num-gpu-blocks-override": int,
    "mamba-cache-dtype": str,
    "mamba-ssm-cache-dtype": str,
    "max-cudagraph-capture-size": int,
}
"""vLLM flags the simulator does not use itself but the planner's ledger does."""

SIM_ONLY_FLAGS = ("gpu", "time-scale", "calibration", "acceptance-rate", "vllm-version", "seed")
"""Flags only `sim-serve` takes (EngineConfig names): strip them when turning a sim variant into `vllm serve`."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servetune sim-serve", add_help=True, allow_abbrev=False)
    p.add_argument("model_pos", nargs="?", metavar="MODEL", help="model directory with config.json")
    p.add_argument("--model")
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
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
    p.add_argument("--gpu", default="H200", help="GPU name from the catalog (sim only)")
    p.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds per wall second (sim only)")
    p.add_argument("--calibration", help="calibration profile JSON from `servetune calibrate` (sim only)")
    p.add_argument("--acceptance-rate", type=float, help="speculative per-token acceptance (sim only)")
    p.add_argument("--vllm-version", help="vLLM release to imitate, e.g. 0.24.0 (sim only; default latest)")
    p.add_argument("--seed", type=int, default=0)
    return p


def parse_sim_args(argv: list[str]) -> SimServeArgs:
    """Parses vLLM-style argv; unknown flags are kept in `ignored` for the startup log."""
    ns, unknown = _parser().parse_known_args(argv)
    model = ns.model or ns.model_pos
    if not model:
        raise ServetuneError("sim-serve needs a model (a directory or config.json)", "pass it first: sim-serve MODEL")
    spec_tokens, method, acceptance = 0, None, 0.8
    if ns.speculative_config:
        try:
            sc = json.loads(ns.speculative_config)
        except json.JSONDecodeError as err:
            raise ServetuneError(
                f"--speculative-config is not JSON: {err}", 'write e.g. \'{"method":"mtp","num_speculative_tokens":2}\''
            ) from None
        spec_tokens = int(sc.get("num_speculative_tokens", 0))
        method = sc.get("method")
        acceptance = float(sc.get("acceptance_rate", acceptance))
    if ns.acceptance_rate is not None:
        acceptance = ns.acceptance_rate
    if not 0 <= acceptance <= 1:
        raise ServetuneError(f"acceptance rate {acceptance} is not in [0, 1]", "give a probability, e.g. 0.8")
    return SimServeArgs(
        model=model,
        served_model_name=ns.served_model_name[0] if ns.served_model_name else None,
        host=ns.host,
        port=ns.port,
        tensor_parallel_size=ns.tensor_parallel_size,
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
        ignored=_pair_flags(unknown),
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
