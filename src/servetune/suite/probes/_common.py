"""Pieces several probes share: figure declarations of a single timed request and the result of one request."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from servetune.suite.requests import Reply
from servetune.suite.result import ProbeResult
from servetune.suite.spec import Figure

OUTPUT_MARGIN = 64
"""Tokens kept free under max_model_len for the answer when a prompt is sized to the context."""


class Params(BaseModel):
    """Base of every probe's parameters: strict, frozen (an experiment file's typo is an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    only_when_changed: list[str] = Field(
        default_factory=list,
        description="Run only on the baseline and on variants that change one of these flags "
        "(seed 001 ran its 2048-token test only where the MTP setting changed).",
    )


def speed_figures(prefix_label: str) -> tuple[Figure, ...]:
    """The figures of one timed generation (decode_speed, long_generation)."""
    return (
        Figure(
            name="output_tok_s",
            unit="tok/s",
            better="higher",
            scaling="rate",
            label=f"{prefix_label} tok/s",
            headline=True,
        ),
        Figure(name="decode_tok_s", unit="tok/s", better="higher", scaling="rate", label="decode tok/s (1/TPOT)"),
        Figure(name="tpot_ms", unit="ms", better="lower", scaling="time", label="TPOT", slo="tpot"),
        Figure(name="ttft_ms", unit="ms", better="lower", scaling="time", label="TTFT", slo="ttft"),
        Figure(name="e2el_ms", unit="ms", better="lower", scaling="time", label="E2EL", slo="e2el"),
        Figure(name="output_tokens", unit="tokens", better="none", label="output tokens"),
    )


UNTIMED_DECODE = (
    "every token arrived in one read (the client was busy while the engine streamed): TPOT is 0 by vLLM's "
    "definition and decode tok/s cannot be timed; re-run on a less busy machine"
)


def speed_values(reply: Reply, requested: int) -> tuple[dict[str, float | None], list[str]]:
    """One generation's figures (vLLM's definitions) and a note when fewer tokens came than were asked."""
    n = reply.output_tokens
    figures: dict[str, float | None] = {
        "output_tokens": float(n),
        "ttft_ms": reply.ttft_s * 1000,
        "e2el_ms": reply.e2el_s * 1000,
        "output_tok_s": n / reply.e2el_s if reply.e2el_s > 0 else None,
        "tpot_ms": reply.tpot_s * 1000 if reply.tpot_s is not None else None,
        "decode_tok_s": 1 / reply.tpot_s if reply.tpot_s else None,
    }
    notes = [] if n == requested else [f"asked for {requested} output tokens, got {n}: speed is per token received"]
    if reply.tpot_s == 0:  # the first token and the end were read at once: no gap to time (a late client)
        notes.append(UNTIMED_DECODE)
    return figures, notes


def single_result(probe: str, reply: Reply, figures: dict[str, float | None], **extra: Any) -> ProbeResult:
    """A one-request probe's result (figures only when the request succeeded)."""
    return ProbeResult(
        probe=probe,
        ok=reply.ok,
        figures=figures if reply.ok else {},
        requests=1,
        failed_requests=0 if reply.ok else 1,
        warnings=list(reply.warnings),
        error=reply.error,
        **extra,
    )
