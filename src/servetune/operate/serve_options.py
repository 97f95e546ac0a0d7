"""How `servetune serve` supervises (`ServeOptions`) and everything its command line takes (`ServeArgs`): the
one owner of serve's flags, their defaults, units and bounds. The command's options are generated from these
fields (`servetune.cli.model_options`), so this module stays light: pydantic and the sizing rules only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from servetune.errors import from_validation_error
from servetune.hardware.gpus import MAX_GPUS
from servetune.operate.evidence import Evidence, Sized
from servetune.operate.sizing import (
    COLD_START_HEADROOM,
    LIVENESS_TTFT_HEADROOM,
    READ_TIMEOUT_HEADROOM,
    ServeSizing,
    serve_sizing,
)

DEFAULT_STARTUP_S = 600.0
DEFAULT_LIVENESS_DEADLINE_S = 10.0
DEFAULT_READ_TIMEOUT_S = 600.0
"""Where the source measured nothing (an engine config, a command line)."""
DAY_S = 86400.0
"""The longest wait any option may set (a startup, a drain, a timeout, a window): longer is a typo, and past it
threads' waits and nginx's timers overflow (`--drain 1e300` made nginx refuse its config)."""
HOUR_S = 3600.0
"""The longest period or delay between two of serve's own actions (a probe, a restart)."""
MAX_COUNT = 1000
"""The most misses or failures in a row an option may ask for."""
MAX_TOKENS = 10_000_000
"""More prompt tokens than any model's context."""
MAX_GIB = 65536.0
"""More memory than any one GPU or host has (64 TiB)."""


def _flags(*names: str) -> dict[str, Any]:
    """A field's command-line flags where its name is not the flag (`listen_port` is `--port`)."""
    return {"flags": [f"--{n}" for n in names]}


class ServeOptions(BaseModel):
    """How `servetune serve` supervises: the numbers a user may set, each with its unit and bound (checked
    before anything starts; serve's command-line options are generated from these fields), and the source's
    measurements (`sizing`), which decide the numbers the user left unset."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_dir: Path = Field(Path("runs/serve"), description="Event log, nginx, engine logs")
    listen_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Proxy port on 127.0.0.1 (default: a free one)",
        json_schema_extra=_flags("port"),
    )
    control_port: int | None = Field(None, ge=1, le=65535, description="Supervisor metrics/control port")
    startup_timeout_s: float | None = Field(
        None,
        gt=0,
        le=DAY_S,
        allow_inf_nan=False,
        description=f"A starting engine's time to serve (default: {COLD_START_HEADROOM:g} x the measured cold start, "
        f"else {DEFAULT_STARTUP_S:g})",
    )
    liveness_period_s: float = Field(
        5.0, gt=0, le=HOUR_S, allow_inf_nan=False, description="Time between liveness probes"
    )
    liveness_deadline_s: float | None = Field(
        None,
        gt=0,
        le=HOUR_S,
        allow_inf_nan=False,
        description=f"A liveness probe's deadline (default: {LIVENESS_TTFT_HEADROOM:g} x the measured p99 TTFT, "
        f"else {DEFAULT_LIVENESS_DEADLINE_S:g})",
    )
    liveness_failures: int = Field(2, ge=1, le=MAX_COUNT, description="Missed liveness probes in a row that mean hung")
    backoff_base_s: float = Field(
        1.0, gt=0, le=HOUR_S, allow_inf_nan=False, description="First restart delay (doubles)"
    )
    backoff_max_s: float = Field(60.0, gt=0, le=HOUR_S, allow_inf_nan=False, description="Longest restart delay")
    stable_after_s: float = Field(
        60.0, gt=0, le=DAY_S, allow_inf_nan=False, description="An engine up this long resets the backoff"
    )
    give_up_starts: int = Field(
        5,
        ge=1,
        le=MAX_COUNT,
        description="Failed starts in a row after which serve stops (exit 1), once the fallback failed too; "
        "a failure no restart cures (model missing, a flag refused) stops it at once",
        json_schema_extra=_flags("give-up"),
    )
    crash_loop_failures: int = Field(
        3,
        ge=1,
        le=MAX_COUNT,
        description="Failures within --crash-window that switch to the fallback",
        json_schema_extra=_flags("crash-loop"),
    )
    crash_loop_window_s: float = Field(
        300.0,
        gt=0,
        le=DAY_S,
        allow_inf_nan=False,
        description="The crash loop's window",
        json_schema_extra=_flags("crash-window"),
    )
    drain_s: float = Field(
        30.0, ge=0, le=DAY_S, allow_inf_nan=False, description="Time in-flight streams get on SIGTERM or a switch"
    )
    stop_grace_s: float = Field(
        10.0, ge=0, le=HOUR_S, allow_inf_nan=False, description="Time an engine gets from SIGTERM to SIGKILL"
    )
    accept_long_tokens: int | None = Field(
        None,
        ge=0,
        le=MAX_TOKENS,
        description="Prompt tokens of the acceptance probe's long step (default: half of max_model_len; 0 skips it)",
    )
    long_prompt_tokens: int | None = Field(
        None, ge=1, le=MAX_TOKENS, description="Prompts above this many tokens go to the --long engine"
    )
    read_timeout_s: float | None = Field(
        None,
        gt=0,
        le=DAY_S,
        allow_inf_nan=False,
        description=f"nginx's read timeout (default: {READ_TIMEOUT_HEADROOM:g} x the longest measured request, "
        f"else {DEFAULT_READ_TIMEOUT_S:g})",
        json_schema_extra=_flags("read-timeout"),
    )
    memory_limit_gib: float | None = Field(
        None,
        gt=0,
        le=MAX_GIB,
        allow_inf_nan=False,
        description="GiB serve's engines may hold together on their device: per GPU for vLLM on GPUs, of host RAM "
        "for CPU engines (default: the whole device); switches, restarts and the fallback are planned within it",
    )
    sizing: ServeSizing = ServeSizing()
    """What the source's measurements say (None where nothing was measured)."""

    @field_validator("run_dir")
    @classmethod
    def _absolute(cls, path: Path) -> Path:
        """nginx takes its prefix and every path in its config relative to that prefix: a relative run folder
        would be doubled (`rel/nginx/rel/nginx/error.log`), so the folder is made absolute once, here."""
        return path.expanduser().absolute()

    @classmethod
    def build(cls, **values: Any) -> ServeOptions:
        """Like the constructor, with a bad value reported as a ServetuneError naming the option."""
        try:
            return cls(**values)
        except ValidationError as err:
            raise from_validation_error(err, where="serve options") from None

    def startup_timeout(self) -> Sized:
        return _sized(self.startup_timeout_s, "startup_timeout_s", self.sizing.startup_timeout_s, DEFAULT_STARTUP_S)

    def liveness_deadline(self) -> Sized:
        return _sized(
            self.liveness_deadline_s,
            "liveness_deadline_s",
            self.sizing.liveness_deadline_s,
            DEFAULT_LIVENESS_DEADLINE_S,
        )

    def read_timeout(self) -> Sized:
        return _sized(self.read_timeout_s, "read_timeout_s", self.sizing.read_timeout, DEFAULT_READ_TIMEOUT_S)


def _sized(given: float | None, name: str, measured: Sized | None, default: float) -> Sized:
    """The user's value, else the measured one, else servetune's default, each saying where it came from."""
    if given is not None:
        return Sized(value=given, source=f"given ({name})")
    return measured or Sized(value=default, source="no measurement: servetune's default")


class ServeArgs(ServeOptions):
    """Everything `servetune serve` takes: what to serve (a source, or an engine and a model with the engine's
    flags after `--`), or a switch of the serve running in `run_dir`; the fallback and long-prompt engines; and
    the supervision options it inherits."""

    source: Path | None = Field(
        None,
        description="Tuning folder (serves its winner) or engine config file",
        json_schema_extra={"argument": True},
    )
    engine: str | None = Field(None, description="vllm, llamacpp or sglang, with --model and flags after --")
    model: str | None = Field(None, description="Model path ('tiny' = servetune's tiny test model)")
    served_model_name: str | None = Field(None, description="The name clients ask for (default: the engine's)")
    switch: Path | None = Field(
        None, description="Blue-green switch the serve running in --run-dir to this config or tuning folder"
    )
    fallback: Path | None = Field(None, description="Fallback engine config after a crash loop")
    gpu: str | None = Field(None, description="GPU type, for the planned fallback (vLLM)")
    gpus: int | None = Field(None, ge=1, le=MAX_GPUS, description="GPUs the config runs on (planned fallback)")
    long: Path | None = Field(None, description="Engine config of the dedicated long-prompt upstream")
    check: bool = Field(
        False,
        description="With --switch: print the switch's memory plan and change nothing (exit 0: it would proceed, "
        "1: it would refuse)",
    )
    max_unavailable_s: float = Field(
        0.0,
        ge=0,
        le=DAY_S,
        allow_inf_nan=False,
        description="With --switch: the longest time without a ready engine the switch may cause, when green does not "
        "fit beside blue and blue must stop first (0: side by side only)",
        # the unit stays in the flag: `--max-unavailable` alone reads as Kubernetes' maxUnavailable (a pod count)
        json_schema_extra=_flags("max-unavailable-s"),
    )

    def options(self, evidence: Evidence) -> ServeOptions:
        """The supervision options, with what the user left unset decided by the source's measurements."""
        own = self.model_dump(include=set(ServeOptions.model_fields) - {"sizing"})
        return ServeOptions.build(**own, sizing=serve_sizing(evidence))


SWITCH_ONLY = frozenset({"switch", "check", "max_unavailable_s"})
"""The fields of a switch request (`--switch NEW`, its `--check` and its bound)."""
WHAT_TO_SERVE = frozenset(set(ServeArgs.model_fields) - set(ServeOptions.model_fields) - SWITCH_ONLY)
"""The fields that say what to serve, not how: a switch takes none of them."""
