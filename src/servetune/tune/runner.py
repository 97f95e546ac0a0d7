"""The tuning loop: for each stage, make its variants, order them to restart the engine as little as
possible, and for each variant: planner check → launch → ready → warm-up → suite with repeats (engine
/metrics before and after each run) → stop → record.  Failures are recorded with their class and log
excerpt and the loop goes on; every run is stored the moment it finishes, so `resume=True` redoes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servetune.engines.config import EngineConfig
from servetune.suite.client import metrics_scraper, warm_up
from servetune.suite.probes import PROBE_FUNCTIONS
from servetune.suite.result import ProbeResult
from servetune.suite.target import Target
from servetune.tune.experiment import ClientSpec, Experiment, Stage
from servetune.tune.models import resolve_model, resolve_tokenizer
from servetune.tune.order import count_launches, order_variants
from servetune.tune.progress import Emit, Progress, stopwatch
from servetune.tune.rank import Ranking, rank
from servetune.tune.result import Failure, RunResult, VariantRecord
from servetune.tune.store import FINISHED, Store
from servetune.tune.timescale import time_scale, to_simulated_time, wall_clock_slos
from servetune.tune.variants import (
    Variant,
    apply_change,
    base_config,
    change_from_point,
    describe_change,
    grid_variants,
    matrix_variants,
    point_name,
)

if TYPE_CHECKING:
    from servetune.engines.launch import RunningEngine

STORE_NAME = "servetune.db"


Launcher = Callable[[EngineConfig, Path, float], "RunningEngine"]
"""(config, log folder, startup timeout) → a ready engine (a context manager that stops it)."""
Feasibility = Callable[[EngineConfig], list[str]]
"""Reasons a config cannot run on the experiment's hardware (empty = it fits): the planner's verdict."""


@dataclass
class Outcome:
    """What `run_experiment` leaves behind."""

    out_dir: Path
    records: list[VariantRecord]
    ranking: Ranking
    launches: int
    files: dict[str, Path] = field(default_factory=dict)


def fingerprint(exp: Experiment) -> str:
    """Identity of an experiment's content: a resumed run must be the same experiment."""
    return hashlib.sha256(exp.model_dump_json().encode()).hexdigest()[:16]


@dataclass
class Runner:
    """Runs one experiment into one folder.  `launcher`, `feasibility` and `probes` default to the real
    engines, the planner and the suite; tests may pass others (never a fake engine for engine behaviour)."""

    exp: Experiment
    out_dir: Path
    resume: bool = False
    emit: Emit = print
    launcher: Launcher | None = None
    feasibility: Feasibility | None = None
    probes: dict[str, Callable[..., Any]] | None = None
    reorder: bool = True
    """Run variants sharing a launch back to back (False keeps the declared order: the ordering benchmark)."""
    store: Store = field(init=False)
    progress: Progress = field(init=False)
    launches: int = 0
    _predict: Callable[[EngineConfig], Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.store = Store(self.out_dir / STORE_NAME)
        self.store.check_experiment(fingerprint(self.exp), self.resume)
        self.store.set_meta("experiment", self.exp.model_dump(mode="json"))
        self.progress = Progress(self.emit)
        self.launcher = self.launcher or _default_launcher(lambda line: self.emit(f"  engine: {line}"))
        self.feasibility = self.feasibility or default_feasibility(self.exp)
        if self.probes is None:
            self.probes = PROBE_FUNCTIONS

    # top level -----------------------------------------------------------------------------------
    def run(self) -> Outcome:
        base, client = base_config(self.exp), self.exp.client
        try:
            for stage in self.exp.variants.as_stages():
                winner = self.run_stage(stage, base, client)
                if winner is not None:
                    base, client = winner.config, winner.client
        finally:
            self.store.close()
        return self.finish()

    def finish(self) -> Outcome:
        store = Store(self.out_dir / STORE_NAME)
        try:
            records = store.records()
        finally:
            store.close()
        return Outcome(self.out_dir, records, rank(self.exp, records), self.launches)

    def run_stage(self, stage: Stage, base: EngineConfig, client: ClientSpec) -> Variant | None:
        """Runs one stage and returns its winner (the next stage's base), None when nothing qualified."""
        if stage.search is not None:
            self.run_search(stage, base, client)
        else:
            if stage.matrix is not None:
                variants = matrix_variants(base, client, stage.matrix, stage.name)
            else:
                assert stage.grid is not None
                variants = grid_variants(base, client, stage.grid, stage.name)
            ordered = order_variants(variants) if self.reorder else variants
            if self.exp.estimate.mode == "off":
                self.run_variants(ordered)
            else:
                self.run_variants(*self._judge(ordered))
        stage_records = [r for r in self.store.records() if r.variant.stage == stage.name]
        winner = rank(self.exp, stage_records).winner
        return winner.record.variant if winner else None

    def run_variants(
        self,
        variants: list[Variant],
        pruned: list[Variant] | None = None,
        estimates: dict[str, RunResult] | None = None,
    ) -> None:
        """Registers the variants (`pruned` ones as judged by estimate only, with their predicted figures),
        then launches what is not finished yet."""
        everything = [*variants, *(pruned or [])]
        start = self.store.next_position()
        for offset, variant in enumerate(everything):
            self.store.add_variant(variant, start + offset)
        for run in (estimates or {}).values():
            self.store.add_run(run)
        for variant in pruned or []:
            if self.store.status(variant.key()) not in FINISHED:
                reasons = [f"not launched: {estimates[variant.key()].result.notes[0]}"] if estimates else []
                self.store.set_status(variant.key(), "skipped", skip_reasons=reasons, estimated=True)
        todo = [v for v in variants if self.store.status(v.key()) not in FINISHED]
        probes = self.exp.suite.probes.enabled()
        self.progress.plan(probes, self.exp.suite.repeats * len(todo), count_launches(todo), len(everything))
        self.progress.variants_done += len(everything) - len(todo)
        self._run_in_launch_groups(todo)

    def _judge(self, variants: list[Variant]) -> tuple[list[Variant], list[Variant], dict[str, RunResult]]:
        """The simulator's verdict before any launch: (to launch best-first, judged by estimate only, the
        predictions as `estimate` runs by variant key)."""
        from servetune.tune.estimates import ESTIMATE_PROBE, judge, predictor

        if self._predict is None:
            self._predict = predictor(self.exp)
        watch = stopwatch()
        self.emit(f"estimate: the simulator judges {len(variants)} variants before launching any")
        predictions = {variant.key(): self._predict(variant.config) for variant in variants}
        verdict = judge(self.exp, variants, predictions)
        runs = {}
        for variant in variants:
            note = verdict.notes[variant.key()]
            if predictions[variant.key()].objective is None:
                self.emit(f"estimate {variant.name}: {note}")
            runs[variant.key()] = RunResult(
                variant_key=variant.key(),
                probe=ESTIMATE_PROBE,
                repeat=0,
                result=predictions[variant.key()].as_result(note),
                wall_s=0.0,
            )
        self.emit(
            f"estimate: judged {verdict.judged} of {len(variants)} variants in {watch():.1f} s; "
            f"launching {len(verdict.launch)}"
            + (f", {len(verdict.pruned)} judged by estimate only" if verdict.pruned else "")
        )
        return verdict.launch, verdict.pruned, runs

    def _run_in_launch_groups(self, todo: list[Variant]) -> None:
        index = 0
        while index < len(todo):
            group = [todo[index]]
            while index + len(group) < len(todo) and todo[index + len(group)].launch_key() == group[0].launch_key():
                group.append(todo[index + len(group)])
            index += len(group)
            self._run_group(group)

    # one launch ----------------------------------------------------------------------------------
    def _run_group(self, group: list[Variant]) -> None:
        """Variants sharing one launch: check, launch once, run each one's suite, stop."""
        first = group[0]
        reasons = self.feasibility(first.config) if self.feasibility else []
        if reasons:
            for variant in group:
                self.store.set_status(variant.key(), "skipped", skip_reasons=reasons)
                self.emit(f"skip {variant.name}: {'; '.join(reasons)}")
                self._skip_all(variant)
            return
        pending = list(group)
        while pending:
            pending = self._launch_and_run(pending)

    def _launch_and_run(self, group: list[Variant]) -> list[Variant]:
        """Launches once and runs variants until done or the engine dies; returns those still to run."""
        from servetune.engines.failures import EngineLaunchError
        from servetune.errors import ServetuneError

        first = group[0]
        for variant in group:
            self.store.set_status(variant.key(), "running")
        self.progress.say(first.name, "launching engine")
        clock = stopwatch()
        log_dir = self.out_dir / "logs" / _safe(first.name)
        try:
            with self.launcher(resolve_model(first.config), log_dir, self.exp.engine.startup_timeout_s) as engine:
                launch_s = clock()
                self.launches += 1
                self.progress.launched(launch_s)
                facts = _facts(engine)
                asyncio.run(warm_up(self._target(first, engine, facts), self.exp.suite.warmup_requests))
                for position, variant in enumerate(group):
                    self.store.set_status(variant.key(), "running", launch_s=launch_s, facts=facts)
                    died = self._run_suite(variant, engine, facts, launch_s if position == 0 else 0.0)
                    self.progress.variants_done += 1
                    if died:
                        return group[position + 1 :]
        except EngineLaunchError as err:
            failure = Failure(klass=err.failure.klass, excerpt=err.failure.excerpt, hint=err.failure.hint)
            for variant in group:
                self._fail(variant, failure, clock())
            return []
        except ServetuneError as err:  # the engine could not even be started (not installed, bad model path...)
            failure = Failure(klass="launch_error", excerpt=err.problem, hint=err.fix)
            for variant in group:
                self._fail(variant, failure, clock())
            return []
        return []

    def _run_suite(self, variant: Variant, engine: RunningEngine, facts: dict[str, Any], launch_s: float) -> bool:
        """Runs every probe × repeat not yet stored; returns True when the engine died on the way.  The
        launch's time is charged to the first variant of the launch (GPU-minutes count whole launches)."""
        watch = stopwatch()

        def clock() -> float:
            return watch() + launch_s

        done = self.store.finished_runs(variant.key())
        target = self._target(variant, engine, facts)
        for probe in self.exp.suite.probes.enabled():
            if not self._applies(probe, variant):
                self.progress.skip(probe, self.exp.suite.repeats)
                continue
            params = getattr(self.exp.suite.probes, probe)
            for repeat in range(self.exp.suite.repeats):
                if (probe, repeat) in done:
                    self.progress.skip(probe)
                    continue
                if not engine.alive():
                    self._fail(variant, _death(engine, probe), clock())
                    return True
                self.progress.say(variant.name, f"{probe} {repeat + 1}/{self.exp.suite.repeats}")
                run_clock = stopwatch()
                result = asyncio.run(self._measure(probe, params, _with_seed(target, variant, repeat)))
                scale = time_scale(variant.config)
                self.store.add_run(
                    RunResult(
                        variant_key=variant.key(),
                        probe=probe,
                        repeat=repeat,
                        result=to_simulated_time(result, scale),
                        wall_s=run_clock(),
                        time_scale=scale,
                    )
                )
                self.progress.ran(probe, run_clock())
                if not engine.alive():
                    self._fail(variant, _death(engine, probe), clock())
                    return True
        wall = clock()
        self.store.set_status(variant.key(), "done", wall_s=wall, gpu_minutes=self._gpu_minutes(wall))
        self.emit(f"done {variant.name} in {wall:.1f} s")
        return False

    async def _measure(self, probe: str, params: Any, target: Target) -> ProbeResult:
        """One probe run with the engine's counters read before and after (their difference is stored)."""
        from servetune.metrics.prometheus import delta

        before = await target.scrape()
        try:
            result = await self.probes[probe](target, params)  # type: ignore[index]
        except Exception as err:  # noqa: BLE001 - a probe's crash is a result to record, not a reason to stop
            result = ProbeResult(probe=probe, ok=False, error=f"{type(err).__name__}: {err}")
        after = await target.scrape()
        if before is None or after is None:
            return result
        d = delta(before, after)
        named = {k: v for k, v in d.model_dump().items() if isinstance(v, float) and k != "duration_s"}
        counters = {k: v for k, v in d.counters.items() if v}
        return result.model_copy(update={"engine_metrics": {**counters, **named, **result.engine_metrics}})

    def _target(self, variant: Variant, engine: RunningEngine, facts: dict[str, Any]) -> Target:
        client = variant.client
        sampling = self.exp.sampling_presets.get(client.sampling or "", {})
        max_len = facts.get("max_model_len") or facts.get("n_ctx_per_slot") or _flag_len(variant.config)
        return Target(
            base_url=engine.base_url,
            model=engine.model_name,
            client=client,
            sampling=sampling,
            max_model_len=max_len,
            tokenizer=resolve_tokenizer(client.tokenizer),
            slos=wall_clock_slos(dict(self.exp.slos), time_scale(variant.config)),
            gpu_count=self.exp.hardware.count if self.exp.hardware.gpu else 0,
            engine=variant.config.engine,
            facts=facts,
            scrape=metrics_scraper(engine.base_url),
        )

    def _applies(self, probe: str, variant: Variant) -> bool:
        """long_generation with only_when_changed runs on the baseline and on variants touching those flags."""
        if probe != "long_generation":
            return True
        only = self.exp.suite.probes.long_generation.only_when_changed  # type: ignore[union-attr]
        return not only or variant.baseline or any(flag in variant.changes for flag in only)

    def _fail(self, variant: Variant, failure: Failure, wall: float) -> None:
        self.store.set_status(
            variant.key(), "failed", failure=failure, wall_s=wall, gpu_minutes=self._gpu_minutes(wall)
        )
        self.emit(f"FAILED {variant.name}: {failure.klass} during {failure.during}")
        self._skip_all(variant)

    def _skip_all(self, variant: Variant) -> None:
        done = self.store.finished_runs(variant.key())
        for probe in self.exp.suite.probes.enabled():
            self.progress.skip(probe, self.exp.suite.repeats - sum(1 for p, _ in done if p == probe))

    def _gpu_minutes(self, wall_s: float) -> float:
        return wall_s / 60 * (self.exp.hardware.count if self.exp.hardware.gpu else 1)

    # search --------------------------------------------------------------------------------------
    def run_search(self, stage: Stage, base: EngineConfig, client: ClientSpec) -> None:
        """Ask/tell over the stage's space; the planner rejects points before launch, the store replays."""
        from servetune.tune.search import SearchSession

        assert stage.search is not None
        objective = self.exp.resolved_objective()

        def make(point: dict[str, Any]) -> Variant:
            change = change_from_point(point)
            config, new_client = apply_change(base, client, change)
            return Variant(
                name=point_name(point),
                stage=stage.name,
                config=config,
                client=new_client,
                changes=describe_change(change),
            )

        def feasible(point: dict[str, Any]) -> list[str]:
            return self.feasibility(make(point).config) if self.feasibility else []

        session = SearchSession(stage.search, objective.goal, feasible)
        for record in (r for r in self.store.records() if r.variant.stage == stage.name and r.status in FINISHED):
            session.replay(_point_of(record.variant, stage), self._value(record), record.gpu_minutes)
        while (point := session.ask()) is not None:
            variant = make(point)
            self.run_variants([variant])
            record = next(r for r in self.store.records() if r.key == variant.key())
            session.tell(point, self._value(record), record.gpu_minutes)
        for point, reasons in session.rejected:
            variant = make(point)
            self.store.add_variant(variant, self.store.next_position())
            self.store.set_status(variant.key(), "skipped", skip_reasons=reasons)

    def _value(self, record: VariantRecord) -> float | None:
        entry = rank(self.exp, [record]).entries[0]
        return entry.objective.mean if entry.eligible and entry.objective else None


def _point_of(variant: Variant, stage: Stage) -> dict[str, Any]:
    assert stage.search is not None
    return {name: variant.config.flags.get(name) for name in stage.search.space}


def _with_seed(target: Target, variant: Variant, repeat: int) -> Target:
    """A seed per (variant, repeat): prompts differ between runs, so no run finds another's prefix cached."""
    from dataclasses import replace

    digest = hashlib.sha256(f"{variant.key()}/{repeat}".encode()).hexdigest()
    return replace(target, seed=int(digest[:8], 16))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def _flag_len(config: EngineConfig) -> int | None:
    value = config.flags.get("max-model-len") or config.flags.get("ctx-size")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        scale = 1024 if text.endswith("k") else 1
        with contextlib.suppress(ValueError):
            return int(float(text.rstrip("k")) * scale)
    return None


def _facts(engine: RunningEngine) -> dict[str, Any]:
    """The engine's startup facts that its log stated (KV cache size, slots, version...)."""
    return {k: v for k, v in engine.facts.model_dump(mode="json").items() if v is not None}


def _death(engine: RunningEngine, probe: str) -> Failure:
    info = engine.classify_death()
    if info is None:  # dead by the process table, alive by the group's own view: say what is known
        return Failure(klass="died_under_load", during=probe)
    return Failure(klass=info.klass, excerpt=info.excerpt, hint=info.hint, during=probe)


def _default_launcher(emit: Emit) -> Launcher:
    def launch(config: EngineConfig, log_dir: Path, startup_timeout_s: float) -> RunningEngine:
        from servetune.engines.launch import launch as engine_launch

        return engine_launch(config, log_dir=log_dir, startup_timeout_s=startup_timeout_s, on_progress=emit)

    return launch


def default_feasibility(exp: Experiment) -> Feasibility | None:
    """The planner's verdict for vLLM configs on the experiment's GPU (None on CPU or without a GPU name).
    A config the planner cannot read (no local config.json) is not judged: it is launched."""
    if exp.hardware.gpu is None:
        return None

    def check(config: EngineConfig) -> list[str]:
        if config.engine not in {"vllm", "sim"}:
            return []
        from servetune.errors import ServetuneError

        try:
            from servetune.hardware.catalog import get_gpu
            from servetune.plan.api import plan_for

            plan = plan_for(config, get_gpu(exp.hardware.gpu or ""), exp.hardware.count, vllm_version=config.version)
        except ServetuneError:
            return []
        if plan.feasible:
            return []
        return [*plan.reasons, *(f"fix: {fix}" for fix in plan.fixes[:3])] or ["the planner says it does not fit"]

    return check


def run_experiment(
    exp: Experiment, out_dir: Path, *, resume: bool = False, emit: Emit = print, **overrides: Any
) -> Outcome:
    """Runs (or resumes) an experiment and writes its reports; the one call `servetune tune` makes."""
    from servetune.report.files import write_reports
    from servetune.tune.environment import environment
    from servetune.tune.recommend import recommend

    runner = Runner(exp, out_dir, resume=resume, emit=emit, **overrides)
    outcome = runner.run()
    versions = {r.variant.config.engine: r.facts.get("version") for r in outcome.records}
    env = environment(versions)
    outcome.files = write_reports(out_dir, exp, outcome.ranking, recommend(exp, outcome.ranking), env)
    return outcome
