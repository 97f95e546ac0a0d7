"""The tuning loop, thin on purpose: for each stage, ask its variant source for a batch while the executor has
room, plan the batch (planner check, estimates, launch groups), submit the launch groups, tell the source how
each variant did as its group ends, and carry the stage's winner into the next stage as its base; at the end,
when `confirm` asks for it, re-measure the finalists with fresh repeats (`tune.results.confirm`). A matrix or a
grid is one batch (every group submitted at once, run as the executor can); a search asks for another trial
whenever a slot is free, so several trials are in flight on several slots (Optuna's TPE with the constant
liar for the pending ones: `tune.search`). Everything is stored as it happens, so `resume=True` repeats
nothing; the reports are written by the caller (`servetune.report`), not here.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.load.backend import ClientSpec
from servetune.secrets import Redactor
from servetune.tune.execution.executor import Executor, executor_for
from servetune.tune.execution.session import Launcher, LaunchSession, default_launcher
from servetune.tune.results.confirm import CONFIRM_STAGE, confirmation_variants
from servetune.tune.results.progress import Emit, Progress
from servetune.tune.results.rank import Ranking, rank
from servetune.tune.results.result import RunResult, VariantRecord
from servetune.tune.results.store import FINISHED, STORE_NAME, Store
from servetune.tune.schema.experiment import Experiment, Stage
from servetune.tune.schema.variants import Variant, base_config
from servetune.tune.search.estimates import ESTIMATE_PROBE, Predictor, predictor
from servetune.tune.search.plan import BatchPlan, plan_batch
from servetune.tune.search.sources import Feasible, FixedSource, VariantSource, Verdict, source_for


@dataclass
class Outcome:
    """What `run_experiment` leaves behind (the store holds the rest)."""

    out_dir: Path
    records: list[VariantRecord]
    ranking: Ranking
    launches: int

    def nothing_succeeded(self) -> str | None:
        """None when at least one variant finished its suite; else why not, with the first variant's cause, so
        a run where every variant failed or was skipped exits non-zero saying so."""
        if any(r.status == "done" for r in self.records):
            return None
        if not self.records:
            return "no variant ran: the experiment planned none"
        first = min(self.records, key=lambda r: r.position)
        if first.failure is not None:
            f = first.failure
            cause = f"{f.klass} during {f.during}" + (f": {f.excerpt.strip()}" if f.excerpt.strip() else "")
            cause += f" ({f.hint})" if f.hint else ""
        else:
            cause = "; ".join(first.skip_reasons) or first.status
        counts = Counter(r.status for r in self.records)
        said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        return f"none of the {len(self.records)} variants succeeded ({said}); the first, {first.variant.name}: {cause}"


def fingerprint(exp: Experiment) -> str:
    """Identity of an experiment's content: a resumed run must be the same experiment (where it runs is not
    its content: a folder started on one executor resumes on another)."""
    return hashlib.sha256(exp.model_dump_json(exclude={"executor"}).encode()).hexdigest()[:16]


def default_feasibility(exp: Experiment) -> Feasible:
    """Why a variant cannot start, before it launches (empty: it can): the engine launcher's own model check
    where launches run on this host (a Ray node has its own disk), then, for vLLM configs on a named GPU, the
    planner's verdict, with the config as the planner serves it (what `plan` and the recommendation print). A
    config the planner cannot read (a Hub id, no local config.json) is not judged by it."""
    hardware = exp.hardware.resolved()
    local = exp.executor.kind not in ("ray", "replay")  # a Ray node checks its own disk; a replay launches nothing

    def check(config: EngineConfig) -> Verdict:
        missing = tuple(_missing_model(config)) if local else ()
        if missing or hardware is None or config.engine not in {"vllm", "sim"}:
            return Verdict(missing)
        from servetune.errors import ServetuneError
        from servetune.plan.api import plan_for
        from servetune.plan.placement import place

        placed = place(hardware, config.flags)
        try:
            plan = plan_for(config, placed.gpu, placed.gpus, vllm_version=config.version)
        except ServetuneError:
            return Verdict()
        if plan.feasible:
            served = {"flags": plan.serve_flags, "version": config.version or plan.vllm_version}
            return Verdict(served=config.model_copy(update=served))
        reasons = [*plan.reasons, *(f"fix: {fix}" for fix in plan.fixes[:3])] or ["the planner says it does not fit"]
        return Verdict(tuple(reasons))

    return check


def _missing_model(config: EngineConfig) -> list[str]:
    """The launcher's `model_missing` verdict, before a launch (the tiny model is built when first used)."""
    from servetune.engines.failures import EngineLaunchError
    from servetune.engines.launch import check_model_path
    from servetune.engines.models import TINY

    if config.model == TINY:
        return []
    try:
        check_model_path(config)
    except EngineLaunchError as err:
        return [f"model_missing: {err.failure.excerpt.removeprefix('servetune: ')}", f"fix: {err.failure.hint}"]
    return []


def _refuse_resume_without_store(out_dir: Path) -> None:
    """A resume into a folder that holds an earlier run's files but not its store would start again from nothing
    and write its results over the earlier ones; an absent or empty folder is a first run (resume = run or
    resume)."""
    if (out_dir / STORE_NAME).exists() or not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    raise ServetuneError(
        f"cannot resume: {out_dir} holds files of an earlier run but not its store {out_dir / STORE_NAME}, so a "
        "resume would start again from nothing and overwrite them",
        f"put {STORE_NAME} back, point --out at the folder that holds it, or drop --resume to start over "
        "(that overwrites the folder's results)",
    )


def run_experiment(
    exp: Experiment,
    out_dir: Path,
    *,
    resume: bool = False,
    emit: Emit = print,
    launcher: Launcher | None = None,
    feasibility: Feasible | None = None,
    executor: Executor | None = None,
    reorder: bool = True,
    retry_failed: bool = False,
    predict: Predictor | None = None,
) -> Outcome:
    """Runs (or resumes) an experiment into `out_dir`. `launcher` and `feasibility` default to the real engines
    and the planner; `executor` defaults to the one `exp.executor` names (a launcher given here is the local
    executor's: the others launch real engines where they run); `reorder=False` keeps the declared order (the
    ordering benchmark); `retry_failed` (with `resume`) runs variants that failed in an earlier session again (a
    transient crash), keeping their runs; `predict` stands for the simulator's estimates when `estimate` asks for
    them (default: `search.estimates.predictor`; a study replaying one table many times passes a cached one)."""
    if launcher is not None and (executor is not None or exp.executor.kind != "local"):
        raise ValueError("a launcher is the local executor's: the other executors launch where they run")
    if resume or retry_failed:
        _refuse_resume_without_store(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = Store(out_dir / STORE_NAME, redactor=Redactor.of(exp))
    try:
        store.lock()
        store.check_experiment(fingerprint(exp), resume or retry_failed)
        if retry_failed:
            retried = store.reset_failed()
            emit(f"retrying {len(retried)} failed variant(s): {', '.join(retried) or 'none'}")
        store.set_meta("experiment", exp.model_dump(mode="json"))
        progress = Progress(emit)
        session = LaunchSession(
            exp, out_dir, store, progress, launcher or default_launcher(lambda line: emit(f"  engine: {line}")), emit
        )
        runner = executor or executor_for(exp)
        try:
            runner.bind(session, store)
            feasible = feasibility or default_feasibility(exp)
            _Loop(exp, store, session, progress, runner, feasible, reorder, predict).run()
        finally:
            runner.close()
        records = store.records()
    finally:
        store.close()
    return Outcome(out_dir, records, rank(exp, records), progress.done_launches)


@dataclass
class _Loop:
    exp: Experiment
    store: Store
    session: LaunchSession
    progress: Progress
    executor: Executor
    feasibility: Feasible | None
    reorder: bool
    predict: Predictor | None = None

    def run(self) -> None:
        base, client = base_config(self.exp), self.exp.client
        predict = None
        if self.exp.estimate.mode != "off":
            predict = self.predict or predictor(self.exp)
        for stage in self.exp.variants.as_stages():
            winner = self.run_stage(stage, base, client, predict)
            if winner is not None:
                base, client = winner.config, winner.client
        searched = any(stage.search is not None for stage in self.exp.variants.as_stages())
        pruned = any(record.estimated for record in self.store.records())
        if self.exp.confirm.wanted(searched, pruned):
            self.confirm()

    def run_stage(
        self, stage: Stage, base: EngineConfig, client: ClientSpec, predict: Predictor | None
    ) -> Variant | None:
        """Runs one stage and returns its winner (the next stage's base), None when nothing qualified."""
        goal = self.exp.resolved_objective().direction
        source = source_for(stage, base, client, goal, self.feasibility)
        for record in self._stage_records(stage.name):
            if record.status in FINISHED:
                source.resume(record.variant, self._value(record), record.gpu_minutes)
        self._drive(source, predict)
        winner = rank(self.exp, self._stage_records(stage.name)).winner
        return winner.record.variant if winner else None

    def confirm(self) -> None:
        """Re-measures the finalists of every stage with fresh repeats (the confirm stage), so the ranking can
        recommend on figures that were not chosen for looking best."""
        measured = [r for r in self.store.records() if r.variant.stage != CONFIRM_STAGE]
        ranking = rank(self.exp, measured)
        if ranking.winner is None:
            return
        ranked = [e.record.variant for e in ranking.entries if e.eligible]
        variants = confirmation_variants(self.exp, ranking.winner.record.variant, ranked)
        repeats = variants[0].repeats
        self.session.emit(
            f"confirm: re-measuring {len(variants)} finalist(s) with {repeats} fresh repeats: "
            + ", ".join(v.name for v in variants)
        )
        self._drive(FixedSource(variants), None)

    def _drive(self, source: VariantSource, predict: Predictor | None) -> None:
        """Asks the source for batches while the executor has room, plans and submits them, and tells the source
        how each variant did, until it has nothing more to try and every launch is over."""
        while True:
            while self.executor.has_room() and (batch := source.ask()):
                plan = plan_batch(
                    self.exp,
                    batch,
                    feasibility=self.feasibility,
                    predictor=predict if source.estimates_order else None,
                    reorder=self.reorder,
                )
                groups = self._register(plan)
                launched = {v.key() for group in groups for v in group}
                for variant in batch:
                    if variant.key() not in launched:
                        self._tell(source, variant)
                for group in groups:
                    self.executor.submit(group)
            finished = self.executor.wait()
            if finished is None:
                break
            for variant in finished:
                self._tell(source, variant)
        for variant, reasons in source.rejected:
            self.store.add_variant(variant, self.store.next_position())
            self.store.set_status(variant.key(), "skipped", skip_reasons=reasons)

    def _register(self, plan: BatchPlan) -> list[list[Variant]]:
        """Registers the batch (estimate-only and infeasible variants with their reasons) and returns the launch
        groups of what is not finished yet."""
        start = self.store.next_position()
        for offset, planned in enumerate(plan.planned):
            self.store.add_variant(planned.variant, start + offset)
        for planned in plan.planned:
            key = planned.variant.key()
            if planned.prediction is not None:
                note = "; ".join(planned.reasons) or "predicted by the simulator"
                self.store.add_run(
                    RunResult(
                        variant_key=key,
                        probe=ESTIMATE_PROBE,
                        repeat=0,
                        result=planned.prediction.as_result(note),
                        wall_s=0.0,
                    )
                )
            if self.store.status(key) in FINISHED:
                continue
            if planned.action == "estimate_only":
                self.store.set_status(
                    key, "skipped", skip_reasons=[f"not launched: {r}" for r in planned.reasons], estimated=True
                )
            elif planned.action == "infeasible":
                self.store.set_status(key, "skipped", skip_reasons=list(planned.reasons))
                self.session.emit(f"skip {planned.variant.name}: {'; '.join(planned.reasons)}")
        for note in plan.notes:
            self.session.emit(note)
        groups = [[v for v in group if self.store.status(v.key()) not in FINISHED] for group in plan.launch_groups]
        groups = [g for g in groups if g]
        todo = [v for g in groups for v in g]
        progress = self.progress
        progress.plan(
            self.exp.suite.probes.enabled(), self.exp.suite.repeats * len(todo), len(groups), len(plan.planned)
        )
        progress.variants_done += len(plan.planned) - len(todo)
        return groups

    def _tell(self, source: VariantSource, variant: Variant) -> None:
        record = self.store.record(variant.key())
        source.tell(variant, self._value(record), record.gpu_minutes)

    def _stage_records(self, stage: str) -> list[VariantRecord]:
        return [r for r in self.store.records() if r.variant.stage == stage]

    def _value(self, record: VariantRecord) -> float | None:
        entry = rank(self.exp, [record]).entries[0]
        return entry.objective.mean if entry.eligible and entry.objective else None
