"""`servetune mock-server`'s arguments (`MockServerArgs`): where it listens and how it answers, the one owner of
the command's flags, defaults, units and bounds (its options are generated from these fields; `mock/server.py`
`run_mock_server` serves)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_TOKENS = 10_000_000
MAX_MS = 3_600_000.0
"""An hour: a longer fixed TTFT or ITL is a typo."""


class MockServerArgs(BaseModel):
    """Everything `servetune mock-server` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    host: str = Field("127.0.0.1", description="Address to listen on")
    port: int = Field(8000, ge=0, le=65535, description="Port (0: a free one, said when ready)")
    model: str = Field("mock", description="The model name it serves")
    ttft_ms: float = Field(50.0, ge=0, le=MAX_MS, allow_inf_nan=False, description="Time to the first token")
    itl_ms: float = Field(10.0, ge=0, le=MAX_MS, allow_inf_nan=False, description="Time between two tokens")
    output_tokens: int = Field(
        128,
        ge=1,
        le=MAX_TOKENS,
        description="Answer length when a request gives no max_tokens",
        json_schema_extra={"unit": "tokens"},
    )
    reasoning_tokens: int = Field(
        0,
        ge=0,
        le=MAX_TOKENS,
        description="Chat answers start with this many reasoning tokens",
        json_schema_extra={"unit": "tokens"},
    )
    fault: tuple[str, ...] = Field(
        (),
        description="Misbehave: kind[:after=N][:seconds=S][:status=CODE][:every=N]",
        json_schema_extra={"split": False},
    )
    precise: bool = Field(
        True,
        description="Spin to exact send times (costs a little CPU); --coarse: sleep",
        json_schema_extra={"off": ["--coarse"]},
    )
    uvloop: bool = Field(
        False, description="Run on uvloop (cheaper, ms timer resolution)", json_schema_extra={"negatable": False}
    )
    reuse_port: bool = Field(
        False,
        description="Share the port with other mock servers (SO_REUSEPORT): one per CPU",
        json_schema_extra={"negatable": False},
    )
    api_key: str | None = Field(None, description="Require this bearer token on /v1/ routes")
