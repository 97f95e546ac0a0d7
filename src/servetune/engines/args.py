"""The engines room's commands' arguments: `LaunchArgs` (`servetune launch`), `TinyModelArgs` (`servetune
tiny-model`) and `EngineArgs`, what every command that starts an engine takes (`check` builds on it). Each is the
one owner of its flags, defaults, units and bounds; the commands' options are generated from these fields, so
this module stays light."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from servetune.engines.config import EngineConfig, EngineName
from servetune.errors import ServetuneError

MAX_STARTUP_S = 86_400.0
"""An engine that takes more than a day to start is not starting."""


class EngineArgs(BaseModel):
    """An engine to start: which, on what model, with its own flags after the known options (by the engine's own
    names: `--max-model-len 4096`, `-tp 2`, `--ctx-size=8192`, read by the engine vocabulary)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    engine: EngineName = Field("vllm", description="The engine to start")
    model: str | None = Field(None, description="Model path or id as the engine takes it")
    served_model_name: str | None = Field(None, description="The name clients ask for (default: the engine's)")
    tiny: bool = Field(False, description="Serve servetune's tiny random model")
    startup_timeout_s: float = Field(
        600.0, gt=0, le=MAX_STARTUP_S, allow_inf_nan=False, description="Time the engine has to serve"
    )
    log_dir: Path = Field(Path("runs/logs"), description="Folder of the engine's log")
    pass_unknown_flags: bool = Field(
        False, description="Pass flags missing from servetune's tables on to the engine (known flags are checked)"
    )
    engine_flags: tuple[str, ...] = Field((), description="The engine's own flags", json_schema_extra={"rest": True})

    def config(self) -> EngineConfig:
        """The engine config these arguments name; the engine's flags read by its vocabulary."""
        from servetune.engines.registry import adapter_for
        from servetune.engines.vocab import parse_argv

        adapter_for(self.engine)  # an unknown engine is an error naming the ones there are, before anything else
        model, served = self.model, self.served_model_name
        if self.tiny:
            from servetune.tiny.cache import tiny_model

            built = tiny_model()
            model = str(built.gguf_path if self.engine == "llamacpp" else built.hf_dir)
            served = served or built.served_name
        if not model:
            raise ServetuneError("no model given", "pass --model PATH (or --tiny for servetune's tiny test model)")
        flags = parse_argv(self.engine, list(self.engine_flags), allow_unknown=self.pass_unknown_flags)
        return EngineConfig(engine=self.engine, model=model, served_model_name=served, flags=flags)


class LaunchArgs(EngineArgs):
    """Everything `servetune launch` takes: the engine, and where it listens."""

    port: int | None = Field(None, ge=0, le=65535, description="Port (default or 0: a free one)")
    host: str = Field("127.0.0.1", description="Address the engine binds")


class TinyModelArgs(BaseModel):
    """Where `servetune tiny-model` builds the tiny model."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    out_dir: Path = Field(description="Directory to build the tiny model in", json_schema_extra={"argument": True})
