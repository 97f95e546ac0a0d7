"""Can this run be trusted? Checked on every run, with a warning that names each problem.

The checks answer the ways published numbers go wrong (peer-tools.md §5): answers shorter than asked
(vLLM #18687, GuideLLM #979), reasoning that eats the whole output budget (vLLM #42548), failures that skew
percentiles (GuideLLM #444), a client too slow to send on schedule, token counts that disagree between the
server and the tokenizer, and input lengths that are not what was asked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from servetune.metrics.record import RequestRecord

LATE_P99_MS = 10.0  # the client dispatched a request later than this against its schedule: it is saturated


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


def check_validity(records: Sequence[RequestRecord]) -> Validity:
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
    if p99 > LATE_P99_MS:
        warnings.append(
            f"the client sent requests late against the schedule (p99 {p99:.1f} ms): it is saturated — lower the "
            "load, or use more client processes"
        )
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
        token_sources=dict(sources),
        tokens_disagree=disagree,
        prompt_tokens_expected=sum(r.prompt_tokens_expected or 0 for r in ok),
        prompt_tokens_reported=sum(r.prompt_tokens or 0 for r in ok),
        prompt_offset_varies=varies,
        lateness_p50_ms=p50,
        lateness_p99_ms=p99,
        lateness_max_ms=float(lateness.max()),
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
