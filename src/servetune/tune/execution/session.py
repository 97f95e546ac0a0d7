"""One launch group's session: launch the engine once → ready → warm-up → every probe × repeat of every variant in
the group that is not stored yet → stop. Each probe run lands in the store the moment it finishes; a launch
failure or an engine death is recorded with the engine adapter's failure class and the log lines that prove it,
and the variants the dead engine could not serve are launched again.

A session needs only its experiment, a folder for the engine logs, a launcher and somewhere to record, so an
executor may run it anywhere: here against the store itself (`local`), or in a slot process on a GPU set of
this host or on a Ray node, against a relay that sends every call back to the one process that writes the
store (`tune.relay`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from servetune.engines.applied import require_applied
from servetune.engines.config import EngineConfig
from servetune.engines.failures import EngineLaunchError
from servetune.engines.models import resolve_model, resolve_tokenizer
from servetune.errors import ServetuneError
from servetune.load.backend import Backend, LiveBackend
from servetune.metrics.slo import wall_clock_slos
from servetune.process.interrupts import run_coroutine
from servetune.suite.registry import get_probe
from servetune.suite.requests import warm_up
from servetune.suite.result import ProbeResult
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext
from servetune.tune.execution.virtual import VirtualEngine
from servetune.tune.results.progress import Emit, stopwatch
from servetune.tune.results.result import Failure, RunResult, VariantStatus
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant

if TYPE_CHECKING:
    from servetune.engines.launch import RunningEngine

    Engine = RunningEngine | VirtualEngine

Launcher = Callable[[EngineConfig, Path, float], "Engine"]
"""(config, log folder, startup timeout) → a ready engine (a context manager that stops it): a launched one, or
the simulator in process (`tune.virtual.virtual_launcher`)."""

TIME_SCALE_FLAG = "time-scale"


class Recorder(Protocol):
    """Where a session's outcomes go: the store (`tune.store.Store`), or a relay to the process that owns it."""

    def finished_runs(self, key: str) -> set[tuple[str, int]]: ...

    def set_status(
        self,
        key: str,
        status: VariantStatus,
        *,
        failure: Failure | None = None,
        launch_s: float | None = None,
        wall_s: float | None = None,
        gpu_minutes: float | None = None,
        facts: dict[str, Any] | None = None,
        ran_on: str | None = None,
    ) -> None: ...

    def add_run(self, run: RunResult) -> None: ...


class Tracker(Protocol):
    """The progress a session reports (`tune.progress.Progress`, or a relay to the process that shows it)."""

    def say(self, variant: str, what: str) -> None: ...

    def launched(self, seconds: float) -> None: ...

    def ran(self, probe: str, seconds: float) -> None: ...

    def skip(self, probe: str, repeats: int = 1) -> None: ...

    def variant_done(self) -> None: ...


def time_scale(config: EngineConfig) -> float:
    """Simulated seconds per wall second of a launch: the sim's `time-scale` flag, 1 for real engines."""
    if config.engine != "sim":
        return 1.0
    value = config.flags.get(TIME_SCALE_FLAG)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 1.0
    try:
        scale = float(value)
    except ValueError:
        return 1.0
    return scale if scale > 0 else 1.0


def default_launcher(emit: Emit) -> Launcher:
    """Real engines through `servetune.engines.launch`, their progress lines passed to `emit`."""

    def launch(config: EngineConfig, log_dir: Path, startup_timeout_s: float) -> RunningEngine:
        from servetune.engines.launch import launch as engine_launch

        return engine_launch(config, log_dir=log_dir, startup_timeout_s=startup_timeout_s, on_progress=emit)

    return launch


@dataclass
class LaunchSession:
    """Runs launch groups of one experiment; engine logs go to `out_dir/logs`, outcomes to `store`."""

    exp: Experiment
    out_dir: Path
    store: Recorder
    progress: Tracker
    launcher: Launcher
    emit: Emit = print
    where: str = "local"
    """Where the session runs (this host, a GPU set, a Ray node): recorded with each launch's engine pid."""

    def run(self, group: list[Variant]) -> None:
        """Launches once per engine life and runs every variant of the group until each is done or failed."""
        pending = list(group)
        while pending:
            pending = self._launch_and_run(pending)

    def _launch_and_run(self, group: list[Variant]) -> list[Variant]:
        """Launches once and runs variants until done or the engine dies; returns those still to run."""
        first = group[0]
        for variant in group:
            self.store.set_status(variant.key(), "running")
        self.progress.say(first.name, "launching engine")
        clock = stopwatch()
        log_dir = self.out_dir / "logs" / safe_name(first.name)
        counted = 0
        try:
            with self.launcher(resolve_model(first.config), log_dir, self.exp.engine.startup_timeout_s) as engine:
                launch_s = clock()
                self.progress.launched(launch_s)
                facts = {**_facts(engine), "flags_applied": require_applied(first.config, engine.facts)}
                pid = "simulated in process" if isinstance(engine, VirtualEngine) else f"engine pid {engine.pid}"
                ran_on = f"{self.where}; {pid}"
                warm = ProbeContext(self._backend(first, engine, facts))
                run_coroutine(warm_up(warm, self.exp.suite.warmup_requests))
                for position, variant in enumerate(group):
                    self.store.set_status(variant.key(), "running", launch_s=launch_s, facts=facts, ran_on=ran_on)
                    died = self._run_suite(variant, engine, facts, launch_s if position == 0 else 0.0)
                    self.progress.variant_done()
                    counted += 1
                    if died:
                        return group[position + 1 :]
        except EngineLaunchError as err:
            failure = Failure(klass=err.failure.klass, excerpt=err.failure.excerpt, hint=err.failure.hint)
            for variant in group:
                self._fail(variant, failure, clock())
        except ServetuneError as err:  # the engine could not even be started (not installed, bad model path...)
            failure = Failure(klass="launch_error", excerpt=err.problem, hint=err.fix)
            for variant in group:
                self._fail(variant, failure, clock())
        for _ in group[counted:]:  # a launch that failed ends its variants too: the progress counts them
            self.progress.variant_done()
        return []

    def _backend(self, variant: Variant, engine: Engine, facts: dict[str, Any]) -> Backend:
        client = variant.client
        if isinstance(engine, VirtualEngine):
            return engine.backend(client)
        updates: dict[str, Any] = {}
        tokenizer = resolve_tokenizer(client.tokenizer)
        if tokenizer != client.tokenizer:
            updates["tokenizer"] = tokenizer
        if client.api_key is None and variant.config.api_key:  # the engine demands its key: the load sends it
            updates["api_key"] = variant.config.api_key
        return LiveBackend(
            engine.base_url,
            engine.model_name,
            client=client.model_copy(update=updates) if updates else client,
            sampling=self.exp.sampling_presets.get(client.sampling or "", {}),
            engine=variant.config.engine,
            max_model_len=facts.get("max_model_len") or facts.get("n_ctx_per_slot"),
            time_scale=time_scale(variant.config),
            gpu_count=self.exp.hardware.gpus_for(variant.config.flags),
        )

    def _run_suite(self, variant: Variant, engine: Engine, facts: dict[str, Any], launch_s: float) -> bool:
        """Runs every probe × repeat not yet stored; returns True when the engine died on the way. The launch's
        time is charged to the first variant of the launch (GPU-minutes count whole launches)."""
        watch = stopwatch()

        def clock() -> float:
            return watch() + launch_s

        done = self.store.finished_runs(variant.key())
        backend = self._backend(variant, engine, facts)
        slos = wall_clock_slos(dict(self.exp.slos), backend.time_scale)
        repeats = variant.repeats or self.exp.suite.repeats
        for name in self.exp.suite.probes.enabled():
            spec, params = get_probe(name), self.exp.suite.probes.params(name)
            if not applies(params, variant):
                self.progress.skip(name, repeats)
                continue
            for repeat in range(repeats):
                if (name, repeat) in done:
                    self.progress.skip(name)
                    continue
                if not engine.alive():
                    self._fail(variant, _death(engine, name), clock())
                    return True
                self.progress.say(variant.name, f"{name} {repeat + 1}/{repeats}")
                run_clock = stopwatch()
                ctx = ProbeContext.of_run(
                    backend, run=variant.key(), repeat=repeat, draws=draw_set(variant), slos=slos, facts=facts
                )
                result = run_coroutine(run_probe(spec, ctx, params))
                if result.unsteady and not result.failed_requests and engine.alive():
                    result = self._again(variant, name, repeat, result, ctx)
                self.store.add_run(
                    RunResult(
                        variant_key=variant.key(),
                        probe=name,
                        repeat=repeat,
                        result=result,
                        wall_s=run_clock(),
                        time_scale=backend.time_scale,
                    )
                )
                self.progress.ran(name, run_clock())
                if not engine.alive():
                    self._fail(variant, _death(engine, name), clock())
                    return True
                hung = _watchdog(engine, result, variant.client.request_timeout_s, name)
                if hung is not None:
                    self._fail(variant, hung, clock())
                    return True
        wall = clock()
        self.store.set_status(variant.key(), "done", wall_s=wall, gpu_minutes=gpu_minutes(self.exp, variant, wall))
        self.emit(f"done {variant.name} in {wall:.1f} s")
        return False

    def _again(self, variant: Variant, probe: str, repeat: int, first: ProbeResult, ctx: ProbeContext) -> ProbeResult:
        """A probe whose load was no steady-state measurement (a server stall, a window that never settled) runs
        once more, on prompts of its own (the first run's are in the engine's cache now); the second result is
        the one kept, with the first one's reasons (`repeated_because`). Once: a stall or trend that comes back is
        the config's, and the second result says so in its own `unsteady` and warnings. A run whose requests
        failed is not repeated: its failures are the louder problem, and the watchdog judges the engine first."""
        self.progress.say(variant.name, f"{probe} {repeat + 1}/{self.exp.suite.repeats} again: {first.unsteady[0]}")
        spec, params = get_probe(probe), self.exp.suite.probes.params(probe)
        again = ProbeContext.of_run(
            ctx.backend,
            run=variant.key(),
            repeat=repeat,
            draws=draw_set(variant),
            again=True,
            slos=ctx.slos,
            facts=ctx.facts,
        )
        second = run_coroutine(run_probe(spec, again, params))
        return second.model_copy(update={"repeated_because": first.unsteady})

    def _fail(self, variant: Variant, failure: Failure, wall: float) -> None:
        self.store.set_status(
            variant.key(), "failed", failure=failure, wall_s=wall, gpu_minutes=gpu_minutes(self.exp, variant, wall)
        )
        self.emit(f"FAILED {variant.name}: {failure.klass} during {failure.during}")
        self.skip_all(variant)

    def skip_all(self, variant: Variant) -> None:
        """Takes a variant's remaining probe runs out of the progress plan (it will not run them)."""
        done = self.store.finished_runs(variant.key())
        repeats = variant.repeats or self.exp.suite.repeats
        for probe in self.exp.suite.probes.enabled():
            self.progress.skip(probe, repeats - sum(1 for p, _ in done if p == probe))


def applies(params: object, variant: Variant) -> bool:
    """A probe restricted with `only_when_changed` runs on the baseline and on variants touching those flags."""
    only = getattr(params, "only_when_changed", None) or []
    return not only or variant.baseline or any(flag in variant.changes for flag in only)


def gpu_minutes(exp: Experiment, variant: Variant, wall_s: float) -> float:
    """Wall minutes times the GPUs the variant's config takes (at least one: a CPU run counts as one)."""
    return wall_s / 60 * max(1, exp.hardware.gpus_for(variant.config.flags))


def draw_set(variant: Variant) -> str:
    """Which load draws a variant's repeats take (`ProbeContext.of_run`): every variant the same ones, so their
    repeats pair; a re-measured finalist fresh ones, shared by the finalists (the confirmation is a new sample,
    and the finalists still compare repeat by repeat)."""
    return "confirm" if variant.confirms else ""


def safe_name(name: str) -> str:
    """A variant's name as a file name (its engine logs' folder)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def _facts(engine: Engine) -> dict[str, Any]:
    """The engine's startup facts that its log stated (KV cache size, slots, version...)."""
    return {k: v for k, v in engine.facts.model_dump(mode="json").items() if v is not None}


WATCHDOG_DEADLINE_S = 30.0


def _watchdog(engine: Engine, result: ProbeResult, request_timeout_s: float, probe: str) -> Failure | None:
    """After a probe whose requests failed, asks the engine for one token: a live process that cannot generate
    one is frozen (SIGSTOP, a deadlock, a wedged GPU), and every later probe would only wait out its timeouts
    on it (94 s past `request_timeout_s: 20` on one, unwatched). The answer's deadline is the client's request
    timeout, at most 30 s. A probe that went well costs nothing."""
    if result.ok and not result.failed_requests:
        return None
    deadline = min(request_timeout_s, WATCHDOG_DEADLINE_S)
    outcome = engine.responds(deadline)
    if outcome.ok:
        return None
    return Failure(
        klass="engine_hung",
        excerpt=f"after {probe}'s requests failed, the engine's process was alive but generated no token within "
        f"{deadline:g} s: {outcome.detail}",
        hint="the engine is frozen (stopped, deadlocked or its GPU wedged); servetune stopped it. See its log; "
        "`tune --retry-failed` measures the variant again",
        during=probe,
    )


def _death(engine: Engine, probe: str) -> Failure:
    info = engine.classify_death()
    if info is None:  # dead by the process table, alive by the group's own view: say what is known
        return Failure(klass="died_under_load", during=probe)
    return Failure(klass=info.klass, excerpt=info.excerpt, hint=info.hint, during=probe)
