"""Running one probe: its spec's `run` on a backend with the probe's own prompt seed, the engine's counters read
before and after (their difference is kept with the result with the engine's split of the probe's mean TTFT, and
servetune's counts are reconciled with them — or, from an engine without counters, with its per-response timings: a
disagreement makes the run not valid), every load run's stalls and unsteadiness collected (`unsteady`), a probe's
crash recorded as a failed result, and figures measured against a time-scaled simulator converted to simulated
(real-GPU) time once, by each figure's declared scaling."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from servetune.control.client import Models
from servetune.load.backend import Backend, GreedyText
from servetune.load.runner import LoadResult
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.engine_time import engine_time
from servetune.metrics.prometheus import MetricsSnapshot, delta, settle
from servetune.metrics.reconcile import ClientAccount, Reconciliation, engine_account, reconcile, timings_account
from servetune.metrics.record import ErrorClass, RequestRecord
from servetune.metrics.slo import Slos
from servetune.suite.result import ProbeResult
from servetune.suite.spec import ProbeContext, ProbeSpec

SETTLE_S = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Waits before scraping the engine again when its counters fall short of what the client saw: an engine
updates them just after it sends a request's last bytes (vLLM from its output loop, llama.cpp as it frees the
slot), so a scrape at once can miss the last request."""


class _Accounted:
    """The probe's backend, keeping every record of every run it is sent: servetune's side of the account."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.records: list[RequestRecord] = []
        self.unsteady: list[str] = []  # each run's reasons it was no steady-state measurement

    @property
    def label(self) -> str:
        return self._backend.label

    @property
    def model(self) -> str:
        return self._backend.model

    @property
    def engine(self) -> str:
        return self._backend.engine

    @property
    def max_model_len(self) -> int | None:
        return self._backend.max_model_len

    @property
    def time_scale(self) -> float:
        return self._backend.time_scale

    @property
    def gpu_count(self) -> int:
        return self._backend.gpu_count

    async def run(self, workload: Workload, shape: LoadShape, *, slos: Slos | None = None) -> LoadResult:
        result = await self._backend.run(workload, shape, slos=slos)
        self.records.extend(result.records)
        self.unsteady.extend(result.summary.validity.unsteady())
        return result

    async def scrape(self) -> MetricsSnapshot | None:
        return await self._backend.scrape()

    async def models(self) -> Models | None:
        return await self._backend.models()

    async def greedy(self, prompt: str, max_tokens: int) -> GreedyText | None:
        """The answer, kept in the account as one request (the engine counts it)."""
        sent = time.monotonic_ns()
        answer = await self._backend.greedy(prompt, max_tokens)
        if answer is not None:
            n = len(answer.tokens) if answer.error is None else 0
            self.records.append(
                RequestRecord(
                    index=len(self.records),
                    sent_ns=sent,
                    done_ns=time.monotonic_ns(),
                    stream=False,
                    prompt_tokens=answer.prompt_tokens,
                    output_tokens=n,
                    usage_output_tokens=n if answer.error is None else None,
                    error_class=ErrorClass.INVALID_RESPONSE if answer.error else None,
                    error=answer.error,
                )
            )
        return answer


async def run_probe(spec: ProbeSpec, ctx: ProbeContext, params: Any) -> ProbeResult:
    """One run of `spec` (never raises for what the server or the probe does: that is a result to record)."""
    backend = _Accounted(ctx.backend)
    before = await backend.scrape()
    own = ctx.for_probe(spec.name)
    try:
        result = await spec.run(replace(own, backend=backend), params)
    except Exception as err:  # noqa: BLE001 - a probe's crash is a result to record, not a reason to stop
        result = ProbeResult(probe=spec.name, ok=False, error=f"{type(err).__name__}: {err}")
    if own.draw is not None:
        result = result.model_copy(update={"draw": own.draw})
    after = await backend.scrape()
    if backend.unsteady:
        result = result.model_copy(update={"unsteady": [*result.unsteady, *backend.unsteady]})
    client = ClientAccount.of(backend.records)
    if before is not None and after is not None:
        after, checked = await _settled(backend, before, after, client, spec)
        d = delta(before, after)
        named = {k: v for k, v in d.model_dump().items() if isinstance(v, float) and k != "duration_s"}
        counters = {k: v for k, v in d.counters.items() if v}
        split = engine_time(before, after, backend.records)
        parts = split.figures(ctx.backend.time_scale) if split is not None else {}
        result = result.model_copy(update={"engine_metrics": {**counters, **named, **parts, **result.engine_metrics}})
    else:
        checked = reconcile(client, timings_account(backend.records), spec.prompts)
    return to_simulated_time(spec, judged(result, checked), ctx.backend.time_scale)


async def _settled(
    backend: _Accounted, before: MetricsSnapshot, after: MetricsSnapshot, client: ClientAccount, spec: ProbeSpec
) -> tuple[MetricsSnapshot, Reconciliation]:
    """The reconciliation, scraped again (`prometheus.settle`) while the engine's totals are still short of the
    client's."""

    def checked(snapshot: MetricsSnapshot) -> Reconciliation:
        return reconcile(client, engine_account(before, snapshot), spec.prompts)

    def short(snapshot: MetricsSnapshot) -> bool:
        return any(c.name != "cached_tokens" and c.engine < c.servetune for c in checked(snapshot).flagged)

    after = await settle(backend.scrape, after, short)
    return after, checked(after)


def judged(result: ProbeResult, checked: Reconciliation) -> ProbeResult:
    """A result with its reconciliation: a figure the engine's own account contradicts makes the run not ok
    (the ranking compares ok runs only), each disagreement a warning with both numbers."""
    flagged = [f"{result.probe}: {c.message}" for c in checked.flagged]
    update: dict[str, Any] = {"reconciliation": checked}
    if flagged:
        update |= {
            "ok": False,
            "warnings": [*result.warnings, *(f"{w} — not valid for comparisons" for w in flagged)],
            "error": result.error or "; ".join(flagged),
        }
    return result.model_copy(update=update)


def to_simulated_time(spec: ProbeSpec, result: ProbeResult, scale: float) -> ProbeResult:
    """A result measured against `sim-serve --time-scale S`, in simulated time: each figure and point value
    converted by its spec's scaling (times × S, rates ÷ S). The engine's /metrics deltas are left alone:
    sim-serve reports its histograms in simulated time already."""
    if scale == 1.0:
        return result

    def convert(values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in values.items():
            figure = spec.figure(name)
            factor = figure.scale_factor(scale) if figure else 1.0
            out[name] = value * factor if isinstance(value, int | float) and value is not None else value
        return out

    return result.model_copy(
        update={
            "figures": convert(result.figures),
            "points": [convert(point) for point in result.points],
            "notes": [*result.notes, f"sim-serve ran at --time-scale {scale:g}: figures converted to simulated time"],
        }
    )
