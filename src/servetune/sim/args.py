"""The simulator room's commands' arguments: `EstimateArgs` (`servetune estimate`: bench's load options, what to
print, and the vLLM config after them), `SimServeCommand` (`servetune sim-serve`) and `CalibrateArgs` (`servetune
calibrate`); each the one owner of its flags, defaults, units and bounds. The commands' options are generated
from these fields, so this module stays light.

MODEL and vLLM's own flags follow the known options (`estimate MODEL -tp 2 --max-model-len 128K --concurrency 8`),
read by the one engine vocabulary with the `sim` table (`sim/flags.py`): a flag it does not know is an error with a
suggestion, unless `--pass-unknown-flags`; the simulator's own flags (`SIM_FLAG_FIELDS`) are among them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from servetune.errors import ServetuneError
from servetune.load.options import LoadOptions

ENGINE_WORDS: dict[str, JsonValue] = {"rest": True}
"""The field of MODEL and vLLM's flags (the words after the known options)."""
OPT_IN: dict[str, JsonValue] = {"flags": ["--pass-unknown-flags", "--allow-unknown-flags"]}
SIM_FLAG_FIELDS = ("gpu", "time_scale", "calibration", "acceptance_rate", "vllm_version", "seed")
"""The simulator's own flags among vLLM's (`sim/flags.py` `SimServeArgs` holds their defaults and bounds)."""
MAX_ITERATIONS = 100_000


class SimServeCommand(BaseModel):
    """Everything `servetune sim-serve` takes besides MODEL and vLLM's flags."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    show_config: bool = Field(
        False, description="Print the engine config and GPUs read from the arguments (as plan --show-config), and stop"
    )
    pass_unknown_flags: bool = Field(
        False, description="Simulate without flags no table knows (named in the startup log)", json_schema_extra=OPT_IN
    )
    engine_flags: tuple[str, ...] = Field((), description="MODEL and vLLM's flags", json_schema_extra=ENGINE_WORDS)


class EstimateArgs(LoadOptions):
    """Everything `servetune estimate` takes: the load (`LoadOptions`, bench's), what to print, and MODEL with
    vLLM's flags after the options."""

    endpoint: Literal["completions", "chat"] = Field("completions", description="The request format simulated")
    json_out: str | None = Field(
        None,
        description="bench's LoadResult JSON to PATH (alone: to standard output)",
        json_schema_extra={"flags": ["--json"], "nargs": "?", "const": "-", "metavar": "[PATH]"},
    )
    jsonl_out: Path | None = Field(
        None, description="Every simulated request's record", json_schema_extra={"flags": ["--jsonl"]}
    )
    explain: str | None = Field(
        None,
        description="Split the mean TTFT of one request class (alone: the first) into API server, queue, prefill "
        "steps, mixed steps, waits between chunks and the first token's hand-over",
        json_schema_extra={"nargs": "?", "const": "", "metavar": "[CLASS]"},
    )
    compare: Path | None = Field(
        None,
        description="Replay the runs `servetune bench --save-result` kept in BENCH_DIR on the simulator (their own "
        "requests and load, in order) and print each load point measured beside simulated: TTFT p50/p99, TPOT p50, "
        "output tok/s and the TTFT's parts (queue, prefill, API server, HTTP) from each side's /metrics; the load "
        "options do not go with it",
        json_schema_extra={"metavar": "BENCH_DIR"},
    )
    show_config: bool = Field(
        False, description="Print the engine config and GPUs read from the arguments (as plan --show-config), and stop"
    )
    pass_unknown_flags: bool = Field(
        False, description="Simulate without flags no table knows", json_schema_extra=OPT_IN
    )
    engine_flags: tuple[str, ...] = Field((), description="MODEL and vLLM's flags", json_schema_extra=ENGINE_WORDS)

    @model_validator(mode="before")
    @classmethod
    def _compare_alone(cls, data: Any) -> Any:
        """`--compare` replays the load the bench folder's runs ran: a load option given with it would be dropped
        (it runs before `LoadOptions`' own validators, on the options as typed)."""
        if isinstance(data, dict) and data.get("compare") is not None:
            given = [_flag(name) for name in data if name in LoadOptions.model_fields]
            if given:
                raise ServetuneError(
                    f"--compare replays the load the bench folder's runs ran; {', '.join(given)} would change it",
                    "drop the load options (or run estimate without --compare)",
                )
        return data


def _flag(name: str) -> str:
    """The flag of a load option as the command line spells it first."""
    extra = LoadOptions.model_fields[name].json_schema_extra
    flags = extra.get("flags") if isinstance(extra, dict) else None
    return str(flags[0]) if isinstance(flags, list) and flags else "--" + name.replace("_", "-")


class CalibrateArgs(BaseModel):
    """Everything `servetune calibrate` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    results: tuple[Path, ...] = Field(
        description="Result directories of measured runs (per-point *.jsonl)", json_schema_extra={"argument": True}
    )
    out: Path = Field(description="Where to write the calibration profile (JSON)")
    model: str = Field(
        description="Model the runs served: a directory with config.json or a bundled name such as qwen3.6-27b"
    )
    gpu: str = Field("H200", description="GPU the runs ran on")
    vllm_version: str | None = Field(None, description="vLLM release of the runs, e.g. 0.24.0")
    points: tuple[str, ...] = Field((), description="Point names to fit on (default: all)")
    iters: int = Field(200, ge=1, le=MAX_ITERATIONS, description="Optimiser iterations")
