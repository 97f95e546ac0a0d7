"""Can this run be trusted? Checked on every run, with a warning that names each problem.

The checks answer the ways published numbers go wrong (peer-tools.md §5): answers shorter than asked
(vLLM #18687, GuideLLM #979), reasoning that eats the whole output budget (vLLM #42548), failures that skew
percentiles (GuideLLM #444), token counts that disagree between the server and the tokenizer, input lengths
that are not what was asked, and a saturated run, in both directions:

- the client limited the run (the one owner of that verdict): it sent late against its schedule, its event
  loop ran late (every time stamp it took is late by as much: TTFT inflated, token gaps squeezed to 0), or a
  client process was busy on its whole core. Closed loop has no schedule to be late against in one process,
  so the event-loop lag and the CPU are what catch a client that cannot keep up with `c1024` on two cores. A
  late loop's warning names what held it up (its own work, other processes on its CPU, or neither), because
  only the first is cured by less load;
- the server was over-saturated in open loop: requests in flight and TTFT both grew over the measured phase
  (GuideLLM's over-saturation signal), so the figures describe a growing queue, not a steady state;
- the server stalled inside the measured window: no stream received a token, all of them waiting at once, for
  far longer than its ITL (`stalls.find_stalls` holds the rule and why its numbers), so the percentiles mix a
  one-off event into the server's steady speed;
- the measured window was not steady: a start-up transient still measured (another tool's run; servetune's own
  count theirs as warm-up) or a trend that never settled (`steady.py`, AIPerf's MSER-5 and trend test).

The client's own evidence (`ClientReport`) comes from the load generator; a run without it (the simulator's
virtual run) is judged on its records alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from servetune.metrics.record import RequestRecord
from servetune.metrics.stalls import Stall, find_stalls
from servetune.metrics.steady import SteadyState, steady_state

LATE_P99_MS = 10.0  # the client dispatched a request later than this against its schedule: it is saturated
LOOP_LAG_P99_MS = 5.0  # a client event loop ran later than this (p99): its time stamps are late by as much
HELD_SHARE = 0.95  # a closed loop that kept fewer than this share of its streams in flight did not run as asked
LATE_OWN_SHARE_PCT = 50.0  # a late loop that ran (or waited for a CPU) this share of its late moments: the cause
CLIENT_CPU_PCT = 95.0  # a client process busy this share of one core over the measured phase: at its limit
QUEUE_GROWTH = 1.5  # over-saturated: in flight and TTFT in the last third at least this times the first third
QUEUE_MIN_REQUESTS = 30  # fewer measured requests than this: too few to judge a trend


class ClientProcess(BaseModel):
    """What one client process went through during the measured phase: the evidence of client saturation."""

    model_config = ConfigDict(frozen=True)

    role: str  # "client" (one process), "coordinator", "worker 0", ...
    pid: int
    cpu_pct: float  # CPU time over wall time of the measured phase, in % of one core
    loop_lag_p50_ms: float  # how late the event loop ran a timer, sampled every few ms
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    # what it did in its late moments (the sampling intervals whose lag reached the p99), in % of their time:
    late_busy_pct: float | None = None  # ran (its own work: the load)
    late_waiting_pct: float | None = None  # waited runnable for a CPU (other processes ran); None: not Linux
    late_own_ms: float | None = None
    """How late its own work alone would have made the loop in those moments (mean, ms): the CPU time it ran in each
    beyond its timer's period, which no free CPU could have fitted in before the timer was due. None: not known."""
    samples: int


class ClientReport(BaseModel):
    """The load generator's own account of a run: how it was spread, what each process went through, what died."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["concurrency", "rate"]
    concurrency: int | None = None  # the requests a closed loop keeps in flight (its budget)
    workers: int  # worker processes that sent requests (1: in the calling process)
    cores: int  # CPUs the client could run on
    processes: list[ClientProcess] = []
    lost: list[str] = []  # one line per worker that died or froze, with its cause and what it had in flight
    clocks: list[str] = []  # one line per worker on a Ray node: its clock's offset from the coordinator's, measured


class QueueGrowth(BaseModel):
    """Requests in flight and TTFT, first third against last third of the measured phase (open loop)."""

    model_config = ConfigDict(frozen=True)

    inflight_first: float
    inflight_last: float
    ttft_first_ms: float
    ttft_last_ms: float
    over_saturated: bool


class Validity(BaseModel):
    model_config = ConfigDict(frozen=True)

    ok: bool
    warnings: list[str]
    measured: int
    warmup_excluded: int
    cooldown_excluded: int
    failed: int
    output_tokens_requested: int
    output_tokens_received: int
    short_requests: int
    finish_reasons: dict[str, int]
    reasoning_only_requests: int
    token_sources: dict[str, int]
    tokens_disagree: int
    prompt_tokens_expected: int
    prompt_tokens_reported: int
    prompt_offset_varies: int
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    client_limited: bool = False
    queue: QueueGrowth | None = None
    client: ClientReport | None = None
    stalls: list[Stall] = []  # server stalls that touched measured requests
    steady: SteadyState | None = None  # where the start-up transient ended, and whether the window still trends

    def unsteady(self) -> list[str]:
        """Why this run is no steady-state measurement, in short: a server stall in its measured window, a window
        that was not steady. What `tune` measures again: a run after it would likely not repeat it."""
        out = [
            f"the server stalled {s.seconds:.2f} s at {s.at_s:.2f} s into a run ({s.requests} requests in flight)"
            for s in self.stalls
        ]
        if self.steady is not None and not self.steady.steady:
            out.append(self.steady.describe())
        return out


def check_validity(records: Sequence[RequestRecord], client: ClientReport | None = None) -> Validity:
    """Every check over a run's records; `client` adds the load generator's evidence (CPU, loop lag, workers)."""
    measured = [r for r in records if r.phase == "measure"]
    ok = [r for r in measured if r.ok]
    warnings: list[str] = []
    if not measured:
        warnings.append("no measured requests: the run was too short for its warm-up, or nothing was sent")
    failed = len(measured) - len(ok)
    if failed:
        classes = Counter(str(r.error_class) for r in measured if not r.ok)
        detail = ", ".join(f"{k} {v}" for k, v in classes.most_common())
        warnings.append(
            f"{failed} of {len(measured)} requests failed ({100 * failed / len(measured):.1f}%: {detail}); "
            "latency figures cover completed requests only"
        )
    asked = [r for r in ok if r.output_tokens_requested]
    short = [r for r in asked if r.output_tokens < (r.output_tokens_requested or 0)]
    if short:
        reasons = Counter(str(r.finish_reason) for r in short)
        warnings.append(
            f"{len(short)} of {len(asked)} answers were shorter than requested (finish reasons: "
            f"{', '.join(f'{k} {v}' for k, v in reasons.most_common())}); TPOT and tok/s describe shorter answers "
            "than planned — ask for ignore_eos or min_tokens"
        )
    reasoning_only = [r for r in ok if r.reasoning_chunks and r.first_content_ns is None]
    if reasoning_only:
        warnings.append(
            f"{len(reasoning_only)} answers were all reasoning and no content: reasoning spent the whole output "
            "budget — raise max_tokens or disable thinking"
        )
    sources = Counter(r.output_tokens_source for r in ok)
    if sources.get("chunks"):
        warnings.append(
            f"{sources['chunks']} answers had no usage and no tokenizer: output tokens counted as chunks "
            "(pass a tokenizer, or let the server send usage)"
        )
    disagree = sum(r.tokens_disagree for r in ok)
    if disagree:
        warnings.append(
            f"{disagree} answers: the server's usage and the local tokenizer disagree on the output token count "
            "(usage is what counts; re-encoding generated text can differ a little, a wrong tokenizer on most answers)"
        )
    expected = [r for r in ok if r.prompt_tokens_expected is not None and r.prompt_tokens is not None]
    varies = 0
    if expected:
        offsets = np.array([r.prompt_tokens - r.prompt_tokens_expected for r in expected])  # type: ignore[operator]
        varies = int(np.sum(np.abs(offsets - np.median(offsets)) > 1))
        if varies:
            warnings.append(
                f"{varies} requests: the server counted a different number of input tokens than planned beyond its "
                "constant template overhead (tokenizer mismatch?)"
            )
    if ok and all(r.prompt_tokens_expected is None for r in ok):
        warnings.append(
            "input lengths are approximate: no tokenizer (pass a tokenizer.json or use a server with /tokenize)"
        )
    lateness = np.array([r.lateness_ns / 1e6 for r in measured]) if measured else np.zeros(1)
    p50, p99 = (float(x) for x in np.percentile(lateness, [50, 99]))
    limited = _client_limits(p99, client, measured)
    warnings.extend(limited)
    queue = queue_growth(measured) if client is not None and client.kind == "rate" else None
    if queue is not None and queue.over_saturated:
        warnings.append(
            f"the server is over-saturated: requests in flight grew from {queue.inflight_first:.1f} to "
            f"{queue.inflight_last:.1f} and TTFT p50 from {queue.ttft_first_ms:.1f} to {queue.ttft_last_ms:.1f} ms "
            "between the first and the last third of the run — the queue grows, these figures are no steady state: "
            "lower the rate"
        )
    if client is not None:
        warnings.extend(client.lost)
    stalls = [s for s in find_stalls(records) if s.measured]
    if stalls:
        warnings.append(_stall_warning(stalls))
    steady = steady_state(records)
    if (unsteady := steady.warning()) is not None:
        warnings.append(unsteady)
    return Validity(
        ok=not warnings,
        warnings=warnings,
        measured=len(measured),
        warmup_excluded=sum(r.phase == "warmup" for r in records),
        cooldown_excluded=sum(r.phase == "cooldown" for r in records),
        failed=failed,
        output_tokens_requested=sum(r.output_tokens_requested or 0 for r in asked),
        output_tokens_received=sum(r.output_tokens for r in asked),
        short_requests=len(short),
        finish_reasons=dict(Counter(str(r.finish_reason) for r in ok)),
        reasoning_only_requests=len(reasoning_only),
        token_sources={str(k): v for k, v in sources.items()},
        tokens_disagree=disagree,
        prompt_tokens_expected=sum(r.prompt_tokens_expected or 0 for r in ok),
        prompt_tokens_reported=sum(r.prompt_tokens or 0 for r in ok),
        prompt_offset_varies=varies,
        lateness_p50_ms=p50,
        lateness_p99_ms=p99,
        lateness_max_ms=float(lateness.max()),
        client_limited=bool(limited),
        queue=queue,
        client=client,
        stalls=stalls,
        steady=steady,
    )


def _stall_warning(stalls: Sequence[Stall]) -> str:
    """What was seen (when, how long, how many requests), and what to do about it."""
    each = "; ".join(
        f"{s.seconds:.2f} s from {s.at_s:.2f} s into the run ({s.requests} requests in flight, {s.measured} measured)"
        for s in stalls
    )
    return (
        f"the server stalled {len(stalls)} time{'s' if len(stalls) > 1 else ''} in the measured window — no stream "
        f"received a token for {each}: the figures mix that pause into the server's speed; run again with a longer "
        "warm-up (an engine compiling kernels for new batch sizes stalls until it has seen them all), or look in the "
        "server's log for what stopped it (compilation, swapping, preemption), or quiet a machine too busy to run it"
    )


def _client_limits(lateness_p99_ms: float, client: ClientReport | None, measured: Sequence[RequestRecord]) -> list[str]:
    """Why the client, not the server, limited this run (empty when nothing says so).

    A process that stamps tokens (the one client process, a worker) is judged by its event-loop lag: its time
    stamps are late by as much. The coordinator of workers stamps none: it hands out conversations and takes
    back slots, so its lateness shows as what it does to the load — sends late against an open loop's schedule
    (the lateness check), or a closed loop that kept fewer streams in flight than asked (checked here)."""
    found = []
    if lateness_p99_ms > LATE_P99_MS:
        found.append(
            f"the client sent requests late against the schedule (p99 {lateness_p99_ms:.1f} ms): it is saturated — "
            "lower the load, or use more client processes (--workers)"
        )
    cores = client.cores if client is not None else 1
    for proc in client.processes if client is not None else []:
        if proc.role == "coordinator":
            held = mean_in_flight(measured) if client is not None and client.kind == "concurrency" else None
            budget = client.concurrency if client is not None else None
            if held is not None and budget and held < HELD_SHARE * budget and proc.loop_lag_p99_ms > LOOP_LAG_P99_MS:
                found.append(
                    f"the client limited this run: the coordinator's event loop ran late (p99 "
                    f"{proc.loop_lag_p99_ms:.1f} ms; {proc.cpu_pct:.0f}% of a core busy) and kept {held:.0f} of the "
                    f"{budget} requested streams in flight on average, so the server saw less load than asked — "
                    "lower the load or the number of workers"
                )
            elif proc.cpu_pct >= CLIENT_CPU_PCT:
                found.append(
                    f"the client is at its limit: the coordinator was busy {proc.cpu_pct:.0f}% of a core during the "
                    "measured phase: more load would be limited by it"
                )
        elif proc.loop_lag_p99_ms > LOOP_LAG_P99_MS:
            found.append(
                f"the client limited this run: {proc.role}'s event loop ran late (p99 {proc.loop_lag_p99_ms:.1f} ms, "
                f"max {proc.loop_lag_max_ms:.1f} ms; {proc.cpu_pct:.0f}% of a core busy), so its time stamps are late "
                f"by as much (TTFT inflated, token gaps squeezed) — {_why_late(proc, cores)}"
            )
        elif proc.cpu_pct >= CLIENT_CPU_PCT:
            found.append(
                f"the client is at its limit: {proc.role} was busy {proc.cpu_pct:.0f}% of a core during the measured "
                f"phase (event-loop lag p99 {proc.loop_lag_p99_ms:.1f} ms): more load would measure the client — use "
                "more client processes (--workers) or CPUs"
            )
    return found


def _why_late(proc: ClientProcess, cores: int) -> str:
    """What held a late event loop up, from what it did in its late moments, and so what to do about it: its own
    load calls for less load or more workers; waiting for a CPU, or neither running nor waiting, is the machine's
    doing, which less load would not cure. Own work that alone overran the timer's period by more than the lag
    bound is the load's doing however the rest splits: other processes sharing its CPU stretch that work, so it
    then ran about as long as it waited (47% and 48% under a CPU hog on both cores) and neither share told it."""
    busy, waiting = proc.late_busy_pct, proc.late_waiting_pct
    more = f"lower the load, or use more client processes (--workers; {cores} CPUs available)"
    if busy is None or waiting is None or busy >= LATE_OWN_SHARE_PCT:
        return more
    if proc.late_own_ms is not None and proc.late_own_ms > LOOP_LAG_P99_MS:
        return (
            f"{more}: its own work alone held it {proc.late_own_ms:.0f} ms late in its late moments, and other "
            f"processes on this machine, which it waited for {waiting:.0f}% of that time, made it later still"
        )
    if waiting >= LATE_OWN_SHARE_PCT:
        return (
            f"in its late moments it waited for a CPU {waiting:.0f}% of the time (busy {busy:.0f}%): other processes "
            "on this machine took its CPU, not this load; run it again with the machine quiet, or give the client "
            "CPUs of its own (taskset, away from the server)"
        )
    return (
        f"in its late moments it was neither running ({busy:.0f}%) nor waiting for a CPU ({waiting:.0f}%): it was "
        "held up outside its own work (a blocking call in the process, or a virtual machine whose host took the "
        "CPU: steal time), which less load would not cure; run it again, on a quieter machine"
    )


def mean_in_flight(measured: Sequence[RequestRecord]) -> float | None:
    """Requests in flight on average over the middle 60 % of the measured phase (its ends ramp: warm-up requests
    still running at the start, the last ones draining at the end); None when the phase is shorter than five
    request durations, too short to have a middle."""
    if len(measured) < QUEUE_MIN_REQUESTS:
        return None
    sent = np.array([r.sent_ns for r in measured], dtype=np.int64)
    done = np.array([r.done_ns for r in measured], dtype=np.int64)
    lo, hi = int(sent.min()), int(done.max())
    if hi - lo < 5 * float(np.median(done - sent)):
        return None
    a, b = lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo)
    overlap = np.clip(np.minimum(done, b) - np.maximum(sent, a), 0, None)
    return float(overlap.sum() / (b - a))


def queue_growth(measured: Sequence[RequestRecord]) -> QueueGrowth | None:
    """GuideLLM's over-saturation signal, made robust to Poisson noise: requests in flight (at each send) and the
    TTFT of completed requests, first third against last third of the measured phase after the first requests
    could have finished (the ramp-up from an empty server is no growth). Over-saturated when both grew by
    `QUEUE_GROWTH` (in flight by 2 requests at least). None when there are too few requests to judge."""
    recs = sorted(measured, key=lambda r: r.sent_ns)
    if len(recs) < QUEUE_MIN_REQUESTS:
        return None
    sent = np.array([r.sent_ns for r in recs], dtype=np.int64)
    done = np.sort(np.array([r.done_ns for r in recs], dtype=np.int64))
    inflight = np.arange(1, len(recs) + 1) - np.searchsorted(done, sent, side="right")
    e2el = np.median([r.e2el_ns for r in recs])
    keep = sent >= sent[0] + e2el
    if keep.sum() < QUEUE_MIN_REQUESTS:
        keep = np.ones(len(recs), dtype=bool)
    sent, inflight = sent[keep], inflight[keep]
    kept = [r for r, k in zip(recs, keep, strict=True) if k]
    third = len(kept) // 3
    ttft = [
        np.array([r.ttft_ns or 0 for r in part if r.ok and r.ttft_ns]) / 1e6 for part in (kept[:third], kept[-third:])
    ]
    if not len(ttft[0]) or not len(ttft[1]):
        return None
    first, last = float(inflight[:third].mean()), float(inflight[-third:].mean())
    t_first, t_last = float(np.median(ttft[0])), float(np.median(ttft[1]))
    grew = last >= QUEUE_GROWTH * first and last - first >= 2 and t_last >= QUEUE_GROWTH * t_first
    return QueueGrowth(
        inflight_first=first, inflight_last=last, ttft_first_ms=t_first, ttft_last_ms=t_last, over_saturated=grew
    )


def run_problems(
    error_rate: float, failed: int, measured: int, validity: Validity, *, max_error_rate: float, accept_warnings: bool
) -> list[str]:
    """Why a benchmark run must not pass (its exit code): more failed requests than allowed, or (unless the user
    accepts them) validity warnings — a run that did not measure what was asked is not a result."""
    problems = []
    if error_rate > max_error_rate:
        problems.append(
            f"{failed} of {measured} requests failed ({100 * error_rate:.1f}%), more than --max-error-rate "
            f"{100 * max_error_rate:g}% allows"
        )
    if validity.warnings and not accept_warnings:
        problems.append(f"{len(validity.warnings)} validity warning(s) above (--accept-warnings to pass anyway)")
    return problems
