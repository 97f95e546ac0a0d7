"""Where a stage's variants come from, behind one ask/tell interface (as Optuna's samplers and AIPerf's search
planner): `ask()` gives the next batch of variants to measure (empty once the source is done), `tell()` reports one
variant's outcome. A matrix or a grid hands out every variant in its first batch; a search asks Optuna for one
point at a time and learns from each result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from servetune.engines.config import EngineConfig
from servetune.load.backend import ClientSpec
from servetune.tune.schema.experiment import Search, Stage
from servetune.tune.schema.variants import (
    Variant,
    apply_change,
    change_from_point,
    describe_change,
    grid_variants,
    matrix_variants,
    point_name,
)
from servetune.tune.search.search import SearchSession


@dataclass(frozen=True)
class Verdict:
    """Whether a config can start, before it launches: the reasons it cannot (none: it can), and the config as the
    planner serves it on the experiment's GPUs (its serve flags; None where the planner did not plan it), so the
    recommendation prints what `plan` prints without planning again."""

    reasons: tuple[str, ...] = ()
    served: EngineConfig | None = None


Feasible = Callable[[EngineConfig], Verdict]
"""The planner's verdict on a config, on the experiment's hardware."""


class VariantSource(Protocol):
    """A stage's supply of variants: the whole interface the loop uses, so the loop never asks which source it
    holds (a new source, random sampling or successive halving, is one class)."""

    estimates_order: bool
    """The simulator's estimates may order and prune what `ask` gives (a fixed list); a search chooses its own
    next point, so its batches run as asked."""

    def resume(self, variant: Variant, value: float | None, gpu_minutes: float) -> None:
        """A variant finished in an earlier session (from the store): the source continues where it stopped."""

    def ask(self) -> list[Variant]:
        """The next variants to measure; empty when the stage has nothing more to try."""

    def tell(self, variant: Variant, value: float | None, gpu_minutes: float) -> None:
        """One variant's objective value (None: failed, skipped or missed the SLOs) and what it cost."""

    @property
    def rejected(self) -> list[tuple[Variant, list[str]]]:
        """Variants the source chose and the planner refused before any launch, with the reasons."""

    def preview(self) -> tuple[list[Variant], str | None]:
        """What `tune --check` shows before anything runs: the first batch, and a line for a source whose points
        are chosen as results arrive (then the batch is empty)."""


class FixedSource:
    """A matrix or a grid: every variant at once, in declaration order; nothing to learn."""

    estimates_order = True

    def __init__(self, variants: list[Variant]) -> None:
        self._variants = variants
        self._given = False

    def resume(self, variant: Variant, value: float | None, gpu_minutes: float) -> None:
        """Nothing to learn: the store's finished variants are skipped where they are planned."""

    def ask(self) -> list[Variant]:
        if self._given:
            return []
        self._given = True
        return list(self._variants)

    def tell(self, variant: Variant, value: float | None, gpu_minutes: float) -> None:
        return None

    @property
    def rejected(self) -> list[tuple[Variant, list[str]]]:
        """A fixed list's infeasible variants are planned, and recorded, with the rest."""
        return []

    def preview(self) -> tuple[list[Variant], str | None]:
        return list(self._variants), None


class SearchSource:
    """Bayesian search over the stage's space: one point per ask, within its budget of trials and GPU-minutes.

    Points the planner rejects never reach `ask`'s caller: they are told to the sampler as infeasible on the spot
    and kept in `rejected` (the loop records them as skipped)."""

    estimates_order = False

    def __init__(
        self, stage: Stage, search: Search, base: EngineConfig, client: ClientSpec, goal: str, feasible: Feasible | None
    ) -> None:
        self.stage = stage
        self.base, self.client = base, client
        self._points: dict[str, dict[str, Any]] = {}

        def judge(point: dict[str, Any]) -> list[str]:
            return list(feasible(self.make(point).config).reasons) if feasible else []

        self.session = SearchSession(search, goal, judge)

    def make(self, point: dict[str, Any]) -> Variant:
        change = change_from_point(point)
        config, client = apply_change(self.base, self.client, change)
        return Variant(
            name=point_name(point),
            stage=self.stage.name,
            config=config,
            client=client,
            changes=describe_change(change),
        )

    def resume(self, variant: Variant, value: float | None, gpu_minutes: float) -> None:
        """A trial finished in an earlier session (from the store): the study continues where it stopped."""
        assert self.stage.search is not None
        point = {name: variant.config.flags.get(name) for name in self.stage.search.space}
        self.session.replay(point, value, gpu_minutes)

    def ask(self) -> list[Variant]:
        point = self.session.ask()
        if point is None:
            return []
        variant = self.make(point)
        self._points[variant.key()] = point
        return [variant]

    def tell(self, variant: Variant, value: float | None, gpu_minutes: float) -> None:
        self.session.tell(self._points.pop(variant.key()), value, gpu_minutes)

    @property
    def rejected(self) -> list[tuple[Variant, list[str]]]:
        return [(self.make(point), reasons) for point, reasons in self.session.rejected]

    def preview(self) -> tuple[list[Variant], str | None]:
        search = self.stage.search
        assert search is not None
        return [], (
            f"search over {', '.join(search.space)} (≤ {search.max_trials} trials, "
            f"≤ {search.budget_gpu_minutes:g} GPU-minutes); one point at a time"
        )


def source_for(
    stage: Stage, base: EngineConfig, client: ClientSpec, goal: str, feasible: Feasible | None
) -> VariantSource:
    """The source of one stage's variants, built on the stage's base (the previous stage's winner)."""
    if stage.search is not None:
        return SearchSource(stage, stage.search, base, client, goal, feasible)
    if stage.matrix is not None:
        return FixedSource(matrix_variants(base, client, stage.matrix, stage.name))
    assert stage.grid is not None
    return FixedSource(grid_variants(base, client, stage.grid, stage.name))
