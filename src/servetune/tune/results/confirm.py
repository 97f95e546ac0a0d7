"""The confirmation of the finalists (the winner's curse): the variant that ranks first after measuring many is,
more often than not, one whose noise flattered it, so the figure the run saw for it is an overestimate (Dynamo's
optimize loop, and every benchmark of adaptive search, warn of it). Before recommending, the run measures its
finalists again — a stage of its own (`confirm`), fresh repeats, fresh prompts — and the ranking picks the winner
from those confirmed figures; the inflation is the search's figure against the confirmed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servetune.tune.results.stats import Estimate
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant

CONFIRM_STAGE = "confirm"
"""The stage the finalists are re-measured in (a name no experiment's stage may take)."""


def confirmation_variants(exp: Experiment, winner: Variant, ranked: Sequence[Variant]) -> list[Variant]:
    """The finalists as variants of the confirm stage: the winner first, then the best by the objective's mean
    (`ranked`, best first) up to `confirm.finalists`, each to be measured with `confirm.repeats` fresh repeats."""
    chosen = [winner, *(v for v in ranked if v.key() != winner.key())][: exp.confirm.finalists]
    stages = {v.stage for v in chosen}
    repeats = exp.confirm.repeats or exp.suite.repeats
    return [
        variant.model_copy(
            update={
                "name": f"{variant.name} (confirm)"
                if len(stages) == 1
                else f"{variant.stage}/{variant.name} (confirm)",
                "stage": CONFIRM_STAGE,
                "baseline": False,
                "repeats": repeats,
                "confirms": variant.key(),
                "note": f"re-measures {variant.name} of stage {variant.stage} with {repeats} fresh repeats",
            }
        )
        for variant in chosen
    ]


@dataclass(frozen=True)
class Confirmation:
    """One finalist: its objective as the run first measured it and as its confirmation measured it."""

    variant: str
    confirmed_as: str
    observed: Estimate
    confirmed: Estimate | None
    goal: str

    @property
    def inflation_pct(self) -> float | None:
        """How much better the first measurement looked than the confirmed one, in % of the confirmed figure
        (positive: the search's figure was flattering); None when the confirmation measured nothing."""
        if self.confirmed is None or self.confirmed.mean == 0:
            return None
        sign = 1.0 if self.goal == "max" else -1.0
        return 100 * sign * (self.observed.mean - self.confirmed.mean) / abs(self.confirmed.mean)

    def text(self, label: str) -> str:
        """`max-num-seqs=64: goodput 7.53 → 6.98 confirmed (3 fresh repeats): the run's figure was inflated by
        7.9%`."""
        if self.confirmed is None or self.inflation_pct is None:
            return f"{self.variant}: {label} {self.observed.mean:.4g}; its confirmation measured nothing"
        pct = self.inflation_pct
        verdict = f"inflated by {pct:.1f}%" if pct > 0 else f"{-pct:.1f}% pessimistic"
        return (
            f"{self.variant}: {label} {self.observed.mean:.4g} → {self.confirmed.mean:.4g} confirmed "
            f"({self.confirmed.n} fresh repeats): the run's figure was {verdict}"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "confirmed_as": self.confirmed_as,
            "observed": self.observed.mean,
            "observed_ci95": _finite(self.observed.half_width),
            "confirmed": self.confirmed.mean if self.confirmed else None,
            "confirmed_ci95": _finite(self.confirmed.half_width) if self.confirmed else None,
            "repeats": self.confirmed.n if self.confirmed else 0,
            "inflation_pct": self.inflation_pct,
        }


def _finite(value: float) -> float | None:
    return None if value == float("inf") else value
