"""The load points of the fidelity campaign (shared by the device script and the scorer).

Which points calibrate and which are held out is decided here too, so the split is fixed before any
number is seen: the simulator is fitted on one-stream decode, the 32k prefill and the loaded 1k/256 mix
of setting A; everything else (8k prefill, the concurrency curve, and all of setting B) is scored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class FidelityPoint:
    """A closed-loop load point: request lengths, concurrency, count and its own warm-up."""

    name: str
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    num_requests: int
    spread: float = 0.0
    """Lengths drawn uniformly within ±spread of the nominal ones (a mix rather than one shape)."""
    warmup_requests: int = 2
    warmup_prompt: int = 512
    warmup_output: int = 16
    fit: bool = False
    """True: used to fit the calibration (setting A only); False: held out and scored."""

    def lengths(self, rng: random.Random) -> list[tuple[int, int]]:
        def draw(nominal: int) -> int:
            if not self.spread:
                return nominal
            return max(1, round(nominal * rng.uniform(1 - self.spread, 1 + self.spread)))

        return [(draw(self.prompt_tokens), draw(self.output_tokens)) for _ in range(self.num_requests)]

    def scaled(self, factor: float) -> FidelityPoint:
        return replace(
            self,
            num_requests=max(1, round(self.num_requests * factor)),
            warmup_requests=max(1, round(self.warmup_requests * factor)),
        )


POINTS: tuple[FidelityPoint, ...] = (
    FidelityPoint(
        "decode_1x1024_512", 1024, 512, 1, 4, warmup_requests=2, warmup_prompt=1024, warmup_output=64, fit=True
    ),
    FidelityPoint("prefill_32k", 32768, 16, 1, 3, warmup_requests=1, warmup_prompt=32768, warmup_output=4, fit=True),
    FidelityPoint("prefill_8k", 8192, 16, 1, 4, warmup_requests=1, warmup_prompt=8192, warmup_output=4),
    FidelityPoint(
        "mix_1k256_c64",
        1024,
        256,
        64,
        200,
        spread=0.25,
        warmup_requests=64,
        warmup_prompt=1024,
        warmup_output=16,
        fit=True,
    ),
    FidelityPoint("curve_c1", 1024, 256, 1, 4, spread=0.25, warmup_requests=1),
    FidelityPoint("curve_c8", 1024, 256, 8, 24, spread=0.25, warmup_requests=8),
    FidelityPoint("curve_c16", 1024, 256, 16, 48, spread=0.25, warmup_requests=16),
    FidelityPoint("curve_c32", 1024, 256, 32, 96, spread=0.25, warmup_requests=32),
)

FIT_SETTING = "A"
