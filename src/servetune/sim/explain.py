"""`servetune estimate --explain`: where the predicted TTFT of one request class goes.

A request's time to first token in the simulated vLLM splits exactly into consecutive parts (from the run's
`RunTrace` and the request's record):

- API server: from the send until the engine has it (parsing and tokenizing, one request at a time, so a burst
  queues here);
- engine's loop: until the engine's loop takes it in at the next planning (async scheduling plans a step while
  the one before runs, so a request arriving mid-step waits for it; vLLM counts this in its API-server part: it
  stamps a request QUEUED when its loop takes it in);
- queue: until the first step that carries its prompt is planned (a full token budget, max_num_seqs or the KV pool
  push it there);
- prefill steps and mixed steps: the steps that carry its prompt chunks, alone with other prompts or together
  with other requests' decodes (each lasts its GPU work or its launch, whichever is longer: `engine.py`);
- between its chunks: steps of a chunked prompt that did not carry it (the budget went to others);
- first token: from the end of its last chunk's step until the client has the token (vLLM hands a step's tokens
  over once the next step is launched).

Each part is averaged over the class's measured requests, so the parts add up to the mean TTFT; the step counts
say how many prefill and mixed steps a request went through and how many decodes the mixed ones carried.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError
from servetune.metrics.record import RequestRecord
from servetune.sim.virtual import RunTrace

PARTS = (
    ("api_ms", "API server (parse + tokenize, one request at a time)"),
    ("loop_ms", "engine's loop (the rest of the step it arrived during)"),
    ("queue_ms", "queue (until a step takes it)"),
    ("prefill_ms", "prefill steps (prompt chunks, no decodes)"),
    ("mixed_ms", "mixed steps (its prompt chunks + other requests' decodes)"),
    ("between_ms", "between its chunks (steps that did not carry it)"),
    ("first_token_ms", "first token (handed over after the next step's launch)"),
)


class TTFTBreakdown(BaseModel):
    """The mean predicted TTFT of one request class, by part (ms), with the step counts behind it."""

    model_config = ConfigDict(frozen=True)

    cls: str
    requests: int
    ttft_mean_ms: float
    ttft_p50_ms: float
    api_ms: float
    loop_ms: float
    queue_ms: float
    prefill_ms: float
    mixed_ms: float
    between_ms: float
    first_token_ms: float
    prefill_steps: float
    """Mean number of prefill-only steps a request's prompt went through."""
    mixed_steps: float
    mixed_decodes: float
    """Mean number of other requests decoded in each of its mixed steps."""
    prompt_tokens: float

    def lines(self) -> list[str]:
        """The breakdown as `estimate` prints it."""
        out = [
            f"explain: TTFT of class {self.cls!r} ({self.requests} measured requests, {self.prompt_tokens:,.0f} prompt "
            f"tokens on average): mean {self.ttft_mean_ms:,.1f} ms (p50 {self.ttft_p50_ms:,.1f} ms)"
        ]
        detail = {
            "prefill_ms": f"{self.prefill_steps:.2f} steps per request",
            "mixed_ms": f"{self.mixed_steps:.2f} steps per request, {self.mixed_decodes:.1f} decodes each",
        }
        width = max(len(label) for _, label in PARTS)
        for key, label in PARTS:
            value = getattr(self, key)
            share = value / self.ttft_mean_ms if self.ttft_mean_ms else 0.0
            extra = f"  ({detail[key]})" if key in detail else ""
            out.append(f"  {label:<{width}}  {value:>10,.1f} ms  {share:>4.0%}{extra}")
        return out


def explain_ttft(trace: RunTrace, records: list[RequestRecord], cls: str | None = None) -> TTFTBreakdown:
    """The TTFT breakdown of class `cls` (default: the first measured request's) over the measured records of a
    run traced with `VirtualServer.run(..., trace=trace)`."""
    measured = [r for r in records if r.phase == "measure" and r.ok and r.chunk_ns]
    if cls is None and measured:
        cls = measured[0].traffic_class
    mine = [r for r in measured if r.traffic_class == cls]
    if not mine:
        classes = sorted({r.traffic_class for r in measured})
        raise ServetuneError(
            f"no measured request of class {cls!r} to explain", f"name one of: {', '.join(classes) or '(none)'}"
        )
    by_key = {key: rid for rid, key in trace.requests.items()}
    carried: dict[str, list[tuple[float, float, int, int]]] = defaultdict(list)
    for start, duration, decodes, chunks in trace.steps:
        for rid, tokens in chunks.items():
            carried[rid].append((start, duration, decodes, tokens))
    parts: dict[str, list[float]] = defaultdict(list)
    mixed_decodes: list[int] = []
    for r in mine:
        rid = by_key[(r.index, r.turn)]
        steps = carried[rid]  # never empty: a prefix hit stops a token short of the prompt (scheduler.py)
        sent, first = r.sent_ns / 1e9, r.chunk_ns[0] / 1e9
        arrived, taken_in = trace.arrived[rid], trace.taken_in[rid]
        prefill = sum(d for _, d, dec, _ in steps if not dec)
        mixed = sum(d for _, d, dec, _ in steps if dec)
        end = steps[-1][0] + steps[-1][1]
        parts["api_ms"].append(arrived - sent)
        parts["loop_ms"].append(taken_in - arrived)
        parts["queue_ms"].append(steps[0][0] - taken_in)
        parts["prefill_ms"].append(prefill)
        parts["mixed_ms"].append(mixed)
        parts["between_ms"].append(max(0.0, end - steps[0][0] - prefill - mixed))  # exact up to rounding
        parts["first_token_ms"].append(first - end)
        parts["prefill_n"].append(sum(1 for _, _, dec, _ in steps if not dec))
        parts["mixed_n"].append(sum(1 for _, _, dec, _ in steps if dec))
        mixed_decodes += [dec for _, _, dec, _ in steps if dec]
    ttfts = [(r.chunk_ns[0] - r.sent_ns) / 1e6 for r in mine]
    ms = {key: 1000 * statistics.fmean(parts[key]) for key, _ in PARTS}
    return TTFTBreakdown(
        cls=str(cls),
        requests=len(mine),
        ttft_mean_ms=statistics.fmean(ttfts),
        ttft_p50_ms=statistics.median(ttfts),
        **ms,
        prefill_steps=statistics.fmean(parts["prefill_n"]),
        mixed_steps=statistics.fmean(parts["mixed_n"]),
        mixed_decodes=statistics.fmean(mixed_decodes) if mixed_decodes else 0.0,
        prompt_tokens=statistics.fmean(r.prompt_tokens or r.prompt_tokens_expected or 0 for r in mine),
    )
