"""The plan of an experiment: for each batch of variants a source hands out, what happens to each — launched (in
which launch group, in which order), judged by the simulator only, or skipped because the planner says it cannot
run — before anything launches.

One function (`plan_batch`) makes it; `servetune tune --check` prints the plan of every stage's first batch and
the loop executes the plans it makes as it goes, so what `--check` shows is what the run does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from servetune.tune.schema.experiment import Experiment, HardwareSpec, Stage, describe_gpus, gpu_slots
from servetune.tune.schema.variants import Variant, base_config
from servetune.tune.search.estimates import Prediction, Predictor, judge
from servetune.tune.search.order import count_launches, order_variants
from servetune.tune.search.sources import Feasible, Verdict, source_for

Action = Literal["launch", "estimate_only", "infeasible"]


@dataclass(frozen=True)
class PlannedVariant:
    """One variant's fate in its batch, with the reasons."""

    variant: Variant
    action: Action
    reasons: tuple[str, ...] = ()
    prediction: Prediction | None = None
    same_as: str | None = None
    """The name of an earlier variant of the batch that measures exactly the same launch and client settings."""


@dataclass(frozen=True)
class BatchPlan:
    """A batch in run order: the launch groups (variants sharing one engine start), then the rest."""

    stage: str
    launch_groups: tuple[tuple[Variant, ...], ...]
    planned: tuple[PlannedVariant, ...]
    notes: tuple[str, ...] = ()

    @property
    def launches(self) -> int:
        return len(self.launch_groups)


def plan_batch(
    exp: Experiment,
    batch: list[Variant],
    *,
    feasibility: Feasible | None,
    predictor: Predictor | None,
    reorder: bool = True,
) -> BatchPlan:
    """Decides every variant's fate: infeasible ones (the planner's reasons) are set aside, the simulator orders
    (or prunes) the rest when `estimate.mode` asks for it, and what is launched is grouped by launch."""
    verdicts: dict[str, Verdict] = {}
    fit: list[Variant] = []
    infeasible: list[Variant] = []
    for variant in batch:
        key = variant.launch_key()
        if key not in verdicts:
            planned_one = feasibility(variant.config) if feasibility else Verdict()
            room = tuple(_executor_room(exp, variant))
            verdicts[key] = Verdict((*room, *planned_one.reasons), planned_one.served)
        variant = variant.model_copy(update={"served": verdicts[key].served})
        (infeasible if verdicts[key].reasons else fit).append(variant)
    ordered = order_variants(fit) if reorder else list(fit)
    notes: list[str] = []
    pruned: list[Variant] = []
    predictions: dict[str, Prediction] = {}
    estimate_notes: dict[str, str] = {}
    if exp.estimate.mode != "off" and predictor is not None and ordered:
        predictions = {v.key(): predictor(v.config) for v in ordered}
        verdict = judge(exp, ordered, predictions)
        ordered, pruned, estimate_notes = verdict.launch, verdict.pruned, verdict.notes
        notes.append(
            f"estimate: judged {verdict.judged} of {len(fit)} variants; launching {len(ordered)}"
            + (f", {len(pruned)} judged by estimate only" if pruned else "")
        )
    groups: list[list[Variant]] = []
    for variant in ordered:
        if groups and groups[-1][0].launch_key() == variant.launch_key():
            groups[-1].append(variant)
        else:
            groups.append([variant])
    first_of: dict[str, str] = {}
    planned = []
    for variant in ordered:
        same = first_of.setdefault(variant.measurement_key(), variant.name)
        note = (estimate_notes[variant.key()],) if variant.key() in estimate_notes else ()
        planned.append(
            PlannedVariant(
                variant,
                "launch",
                note,
                predictions.get(variant.key()),
                same_as=same if same != variant.name else None,
            )
        )
    planned += [
        PlannedVariant(v, "estimate_only", (estimate_notes.get(v.key(), ""),), predictions.get(v.key())) for v in pruned
    ]
    planned += [PlannedVariant(v, "infeasible", verdicts[v.launch_key()].reasons) for v in infeasible]
    return BatchPlan(batch[0].stage if batch else "", tuple(tuple(g) for g in groups), tuple(planned), tuple(notes))


def _executor_room(exp: Experiment, variant: Variant) -> list[str]:
    """Why a launch cannot run on the executor's GPUs, when they are known before the run (`local-gpus` with
    its ids given): `--check` says so as the run does, instead of the run stopping at that batch. A Ray
    cluster's resources are only known once connected; its executor refuses a too-wide launch then."""
    gpus = exp.executor.gpus if exp.executor.kind == "local-gpus" else None
    need = exp.hardware.slot_size(variant.config.flags)
    if gpus is None or gpu_slots(gpus, need) >= 1:
        return []
    return [
        f"needs {need} GPU(s) for one launch, but {describe_gpus(gpus)} (lower its parallel sizes, or give more --gpus)"
    ]


@dataclass(frozen=True)
class StagePlan:
    """A stage as `--check` shows it: its first batch planned on the experiment's base."""

    stage: Stage
    base_from: str
    batch: BatchPlan
    declared_launches: int
    search: str | None = None


@dataclass(frozen=True)
class ExperimentPlan:
    """Every stage's plan, the suite, and the notes a user should read before launching."""

    name: str
    stages: tuple[StagePlan, ...]
    probes: tuple[str, ...]
    repeats: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    hardware: HardwareSpec | None = None

    def warnings(self) -> list[str]:
        """What a user must read before launching: variants that cannot start, and a plan where none can."""
        planned = [p for sp in self.stages for p in sp.batch.planned]
        skipped = [p for p in planned if p.action == "infeasible"]
        out = []
        if skipped:
            first = skipped[0]
            out.append(
                f"warning: {len(skipped)} of {len(planned)} variants cannot start and will be skipped; the first, "
                f"{first.variant.name}: {'; '.join(first.reasons)}"
            )
        if self.none_can_start():
            out.append("warning: no variant can start: the run would measure nothing")
        return out

    def none_can_start(self) -> bool:
        """Every planned variant is skipped and no stage searches (a search's points are planned as it runs)."""
        planned = [p for sp in self.stages for p in sp.batch.planned]
        return not any(sp.search for sp in self.stages) and all(p.action == "infeasible" for p in planned)

    def lines(self) -> list[str]:
        """The plan as `servetune tune --check` prints it."""
        out = [f"experiment {self.name}: valid file", *self.warnings()]
        for sp in self.stages:
            batch = sp.batch
            head = f"stage {sp.stage.name}: "
            if sp.search:
                head += sp.search
            else:
                head += (
                    f"{len(batch.planned)} variants, {batch.launches} engine starts (declared order: "
                    f"{sp.declared_launches})"
                )
            if sp.base_from != "experiment":
                head += f"; its base is the winner of stage {sp.base_from}"
            out.append(head)
            out += [f"  · {note}" for note in batch.notes]
            for p in batch.planned:
                change = ", ".join(f"{k}={v}" for k, v in p.variant.changes.items()) or "(baseline)"
                mark = {"launch": "", "estimate_only": "estimate only: ", "infeasible": "skipped: "}[p.action]
                detail = "; ".join(r for r in p.reasons if r)
                if p.same_as:
                    detail = f"same launch and client as {p.same_as}" + (f"; {detail}" if detail else "")
                shown = f"  [{mark}{detail}]" if mark or detail else ""
                out.append(f"  {p.variant.name:28s} {p.variant.config.engine:9s} {change}{shown}")
        out.append(f"suite: {', '.join(self.probes)} × {self.repeats} repeats")
        out += list(self.notes)
        return out

    def _placement(self, variant: Variant) -> dict[str, object] | None:
        placed = self.hardware.placement(variant.config.flags) if self.hardware else None
        return placed.shown() if placed else None

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment": self.name,
            "stages": [
                {
                    "name": sp.stage.name,
                    "base_from": sp.base_from,
                    "search": sp.search,
                    "launches": sp.batch.launches,
                    "variants": [
                        {
                            "name": p.variant.name,
                            "action": p.action,
                            "reasons": list(p.reasons),
                            "same_as": p.same_as,
                            "config": p.variant.config.model_dump(mode="json"),
                            "placement": self._placement(p.variant),
                            "changes": p.variant.changes,
                            "prediction": p.prediction.figures if p.prediction else None,
                        }
                        for p in sp.batch.planned
                    ],
                }
                for sp in self.stages
            ],
            "probes": list(self.probes),
            "repeats": self.repeats,
            "warnings": self.warnings(),
        }


def plan_experiment(exp: Experiment, *, feasibility: Feasible | None, predictor: Predictor | None) -> ExperimentPlan:
    """The plan `--check` prints: every stage's first batch on the experiment's own base (a later stage's real
    base is the previous stage's winner, known only once that stage ran)."""
    base, client = base_config(exp), exp.client
    stages = []
    goal = exp.resolved_objective().direction
    previous = "experiment"
    for stage in exp.variants.as_stages():
        source = source_for(stage, base, client, goal, feasibility)
        batch, search = source.preview()
        planned = plan_batch(exp, batch, feasibility=feasibility, predictor=predictor)
        stages.append(StagePlan(stage, previous, planned, count_launches(batch), search))
        previous = stage.name
    probes = tuple(exp.suite.probes.enabled())
    return ExperimentPlan(exp.name, tuple(stages), probes, exp.suite.repeats, hardware=exp.hardware)
