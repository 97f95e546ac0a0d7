"""`check_server`: the acceptance probe on a running server — what `servetune check` prints and what a supervisor
calls readiness. One function, so the CLI, the operate room and the tests run the very same check."""

from __future__ import annotations

from servetune.control.client import ControlTimeouts
from servetune.load.backend import ClientSpec, LiveBackend
from servetune.suite.registry import get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext


async def check_server(
    base_url: str,
    model: str,
    *,
    long_context_tokens: int | None = None,
    api_key: str | None = None,
    timeout_s: float = 120.0,
    endpoint: str = "chat",
    max_model_len: int | None = None,
) -> ProbeResult:
    """Runs the acceptance probe against `base_url` (`…/v1` is accepted); `passed` = 1.0 when every step did."""
    spec = get_probe("acceptance")
    params = spec.params.model_validate({"long_context_tokens": long_context_tokens} if long_context_tokens else {})
    backend = LiveBackend(
        base_url,
        model,
        client=ClientSpec(api_key=api_key, request_timeout_s=timeout_s, endpoint=endpoint),  # type: ignore[arg-type]
        max_model_len=max_model_len,
        control=ControlTimeouts(connect_s=min(5.0, timeout_s), total_s=min(timeout_s, 30.0)),
    )
    return await run_probe(spec, ProbeContext(backend), params)


def passed(result: ProbeResult) -> bool:
    return result.figures.get("passed") == 1.0
