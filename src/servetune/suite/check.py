"""`check_server`: the acceptance probe on a running server — what `servetune check` prints and what a supervisor
calls readiness. One function, so the CLI, the operate room and the tests run the very same check; `run_check`
is the command (`suite/check_args.py` `CheckArgs`): the server at `--url`, or an engine it launches first."""

from __future__ import annotations

import asyncio

from rich.console import Console
from rich.table import Table

from servetune.control.client import ControlTimeouts, normalize_base_url
from servetune.engines.foreground import start
from servetune.errors import ServetuneError
from servetune.load.backend import ClientSpec, LiveBackend
from servetune.process.interrupts import run_coroutine
from servetune.suite.check_args import CheckArgs
from servetune.suite.registry import get_probe
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext

STOP_TRIES = 30
"""Cancels sent (0.1 s apart) to a probe past the check's bound before it is left to the loop's shutdown."""


async def check_server(
    base_url: str,
    model: str,
    *,
    long_context_tokens: int | None = None,
    api_key: str | None = None,
    timeout_s: float = 120.0,
    endpoint: str = "chat",
    max_model_len: int | None = None,
    total_s: float | None = None,
) -> ProbeResult:
    """Runs the acceptance probe against `base_url` (`…/v1` is accepted); `passed` = 1.0 when every step did.
    `timeout_s` bounds each request, `total_s` (when given) the whole check: a frozen server otherwise costs one
    wait per request the probe makes. A server that cannot be reached or does not answer in time is a failed
    `server` step that says so, not a result without steps."""
    spec = get_probe("acceptance")
    params = spec.params.model_validate({"long_context_tokens": long_context_tokens} if long_context_tokens else {})
    backend = LiveBackend(
        base_url,
        model,
        client=ClientSpec(api_key=api_key, request_timeout_s=timeout_s, endpoint=endpoint),  # type: ignore[arg-type]
        max_model_len=max_model_len,
        control=ControlTimeouts(connect_s=min(5.0, timeout_s), total_s=min(timeout_s, 30.0)),
    )
    probe = asyncio.ensure_future(run_probe(spec, ProbeContext(backend), params))
    finished, _ = await asyncio.wait({probe}, timeout=total_s)
    if not finished:
        await _stopped(probe)
        error = f"{base_url} did not answer within {total_s:g} s (--timeout)"
        return ProbeResult(
            probe=spec.name, ok=False, figures={"passed": 0.0}, error=error, notes=[f"FAIL server: {error}"]
        )
    result = probe.result()
    if not result.notes and result.error:
        # The probe stopped before its first step: the error is why (a refused connection, a server that hangs).
        reason = result.error.split("\n", 1)[0]
        name, sep, rest = reason.partition(": ")
        if sep and name.isidentifier():
            reason = rest
        result = result.model_copy(update={"notes": [f"FAIL server: {reason}"], "figures": {"passed": 0.0}})
    return result


async def _stopped(task: asyncio.Future[ProbeResult]) -> None:
    """Cancels `task` until it stops (for at most a few seconds): a cancel that lands as one of the probe's own
    request timeouts fires is lost inside `asyncio.wait_for` (Python 3.11), so one cancel may not stop it."""
    for _ in range(STOP_TRIES):
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
        if task.done():
            if not task.cancelled():
                task.exception()  # retrieved: the check's answer is the timeout, not what the probe ended with
            return


def passed(result: ProbeResult) -> bool:
    return result.figures.get("passed") == 1.0


def run_check(args: CheckArgs) -> int:
    """`servetune check`: the exit code is 1 when a step failed."""
    if args.url:
        if not args.model:
            raise ServetuneError("--url needs --model (the served model name)", "add --model NAME")
        result, base_url, name = _accept(args, args.url, args.model, args.api_key), args.url, args.model
    else:
        with start(args) as running:
            result = _accept(args, running.base_url, running.model_name, None)
            base_url, name = running.base_url, running.model_name
    if args.as_json:
        print(result.model_dump_json(indent=2))
    else:
        _print(result, normalize_base_url(base_url), name)
    return 0 if passed(result) else 1


def _accept(args: CheckArgs, base_url: str, model: str, api_key: str | None) -> ProbeResult:
    timeout = args.timeout_s
    return run_coroutine(
        check_server(
            base_url, model, long_context_tokens=args.long_context, api_key=api_key, timeout_s=timeout, total_s=timeout
        )
    )


def _print(result: ProbeResult, base_url: str, model: str) -> None:
    table = Table(title=f"servetune check: {model} at {base_url}")
    for col in ("step", "result", "detail"):
        table.add_column(col)
    for note in result.notes:
        verdict, _, rest = note.partition(" ")
        step, _, detail = rest.partition(": ")
        colour = {"PASS": "green", "FAIL": "red"}.get(verdict, "yellow")
        table.add_row(step, f"[{colour}]{verdict}[/]", detail)
    console = Console()
    console.print(table)
    console.print("[bold green]PASS[/]" if passed(result) else "[bold red]FAIL[/]")
