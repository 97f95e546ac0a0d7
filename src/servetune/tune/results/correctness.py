"""The correctness gate: a variant whose knobs change what the model computes (KV-cache dtype, quantization,
speculative decoding, another model file) may be faster because it is wrong. Its greedy answers to the
correctness probe's fixed prompts are compared with the baseline's; the tolerance is the baseline's agreement with
itself over its own repeats (an engine that is not deterministic across runs cannot be held to more), less the
probe's `max_loss_pct`. A variant below it fails the gate and is not ranked, with the figures in the reason.

Agreement of two answer sets: the tokens two answers share before they first differ, over the longer answer's
length, summed over the prompts (100% = the same greedy text). The log-probabilities of the shared tokens are
reported beside it (their largest difference), not judged: a lossy KV dtype moves them even when the text holds.

With dummy or random weights (the tests' tiny model) the gate proves only its mechanics: such a model's answers
are noise that any change of arithmetic reshuffles; on real weights it tells a lossy change from a harmless one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servetune.load.backend import GreedyText
from servetune.tune.results.result import VariantRecord

PROBE = "correctness"


@dataclass(frozen=True)
class Agreement:
    """How far two answer sets agree."""

    pct: float
    drift: float | None
    """The largest |Δ log-probability| over the tokens they share (None: no log-probabilities)."""


def agreement(a: Sequence[GreedyText], b: Sequence[GreedyText]) -> Agreement:
    """Agreement of two runs' answers, prompt by prompt."""
    shared = total = 0
    drift: float | None = None
    theirs = {s.prompt: s for s in b}
    for mine in a:
        other = theirs.get(mine.prompt)
        if other is None:
            continue
        n = 0
        for x, y in zip(mine.tokens, other.tokens, strict=False):
            if x != y:
                break
            n += 1
        for lx, ly in zip(mine.logprobs[:n], other.logprobs[:n], strict=False):
            if lx is not None and ly is not None:
                drift = max(drift or 0.0, abs(lx - ly))
        shared += n
        total += max(len(mine.tokens), len(other.tokens))
    return Agreement(100.0 * shared / total if total else 100.0, drift)


def _answers(record: VariantRecord) -> list[list[GreedyText]]:
    runs = sorted((r for r in record.runs if r.probe == PROBE and r.result.ok), key=lambda r: r.repeat)
    return [list(r.result.samples) for r in runs if r.result.samples]


@dataclass(frozen=True)
class Verdict:
    """A variant against its baseline: its agreement, the baseline's with itself, and the bar."""

    variant: Agreement
    baseline_self: Agreement
    max_loss_pct: float

    @property
    def passed(self) -> bool:
        return self.variant.pct >= self.baseline_self.pct - self.max_loss_pct

    def text(self) -> str:
        drift = "" if self.variant.drift is None else f", shared tokens' log-probs within {self.variant.drift:.3g}"
        return (
            f"correctness: greedy answers agree {self.variant.pct:.0f}% with the baseline's{drift} (the baseline "
            f"agrees {self.baseline_self.pct:.0f}% with itself; {self.max_loss_pct:g} points allowed below that)"
        )


def verdict(record: VariantRecord, baseline: VariantRecord, max_loss_pct: float) -> Verdict | None:
    """The gate for one variant (None: it or its baseline ran no correctness probe). The baseline's first
    repeat is the reference; its agreement with its other repeats is the tolerance (with one repeat: exactness)."""
    mine, base = _answers(record), _answers(baseline)
    if not mine or not base:
        return None
    own = [agreement(base[0], other) for other in base[1:]] or [Agreement(100.0, 0.0)]
    tolerance = min(own, key=lambda a: a.pct)
    tolerance = Agreement(tolerance.pct, max((a.drift or 0.0 for a in own), default=None))
    found = [agreement(run, base[0]) for run in mine]
    worst = min(found, key=lambda a: a.pct)
    drifts = [a.drift for a in found if a.drift is not None]
    return Verdict(Agreement(worst.pct, max(drifts) if drifts else None), tolerance, max_loss_pct)
