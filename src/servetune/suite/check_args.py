"""`servetune check`'s arguments (`CheckArgs`): a running server to check (`--url`), or an engine to launch and
check (`EngineArgs`); the one owner of its flags, defaults, units and bounds. The command's options are generated
from these fields, so this module stays light; `suite/check.py` `run_check` does what they ask."""

from __future__ import annotations

from pydantic import Field

from servetune.engines.args import MAX_STARTUP_S, EngineArgs

MIN_LONG_CONTEXT = 16
"""Prompt tokens of the shortest long request that still says something about the context window."""


class CheckArgs(EngineArgs):
    """Everything `servetune check` takes."""

    url: str | None = Field(None, description="Check a running server (base URL) instead of launching one")
    long_context: int | None = Field(
        None,
        ge=MIN_LONG_CONTEXT,
        description="Prompt tokens of the long request (default: half of max_model_len)",
    )
    api_key: str | None = Field(
        None, description="Key the server demands (with --url)", json_schema_extra={"envvar": "OPENAI_API_KEY"}
    )
    timeout_s: float = Field(
        120.0,
        gt=0,
        le=MAX_STARTUP_S,
        allow_inf_nan=False,
        description="Time the whole check may take, every request in it (a launch has --startup-timeout)",
    )
    as_json: bool = Field(
        False, description="Print the result as JSON instead of a table", json_schema_extra={"flags": ["--json"]}
    )
