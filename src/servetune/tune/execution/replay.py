"""Executor `replay`: answers a tune from a measured table (`tune.execution.replay_table`) instead of launching
engines, so every strategy of the tuner — the full grid, a search (TPE or random), the simulator's pruning, a
confirmation of the finalists — runs unchanged against real measurements, in seconds, and can be run again with
another seed.

What a launch group costs and returns, from the table:
- the launch: the variant's measured launch-to-ready (`ready_s`, cold or warm as recorded; a second start of a
  launch this replay already made is charged the table's warm start when it has one) plus its warm-up;
- each probe × repeat: one of the variant's measured repeats of the table probe that sent the same load, with the
  time that repeat took. Which one is drawn with replacement by a seeded generator (`executor.seed`, the probe,
  the repeat and the variant's set of draws, `session.draw_set`) — not by the variant: the table's repeat k of
  every cell was measured on the same arrival draw (seed k), and a tune's repeat r of every variant sends the same
  draw, so repeat r of every variant is answered with the same k, and the ranking pairs them as it pairs a live
  tune's (each result names its draw: the table probe and k). Drawn, not replayed in order, so a confirmation's
  "fresh" repeats and two seeds' searches differ as two real runs would; with the table's few repeats the draws
  are bootstrap draws, and their spread is the table's, not a new measurement's. A cell measured in several
  launches has a repeat k of each: which launch's answers is drawn for the variant (a launch's server is its own).
  A cell that lacks the repeat drawn (not measured) is answered with one of its own, drawn for the variant and
  named by its own number.

A variant the table has no cell for (a value it did not measure), or whose launch the table records as failed,
is recorded failed with the reason (`not_in_table`, or the table's failure class), costing nothing. The time is
charged, never waited for: `wall_s` and `gpu_minutes` are the measured seconds, and the loop's budgets count them.
"""

from __future__ import annotations

import random
from typing import Any

from servetune.errors import ServetuneError
from servetune.suite.result import ProbeResult
from servetune.tune.execution.local import LocalExecutor
from servetune.tune.execution.replay_table import ReplayTable, TableVariant
from servetune.tune.execution.session import LaunchSession, applies, draw_set, gpu_minutes
from servetune.tune.results.result import Failure, RunResult
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant

REPLAYED_PROBE = "fixed_load"
"""The probe a table answers (its probes are fixed loads)."""


class ReplayExecutor(LocalExecutor):
    """One launch group at a time, answered from the table; nothing is launched and no time passes."""

    def __init__(self, exp: Experiment, table: str, seed: int = 0) -> None:
        super().__init__()
        self.exp = exp
        self.table = ReplayTable.load(table)
        self.seed = seed
        self.probes = probe_map(exp, self.table)
        self._started: set[str] = set()

    def _run(self, session: LaunchSession, group: list[Variant]) -> None:
        first = group[0]
        cell = self.table.find(first.config.engine, dict(first.config.flags))
        failure = self._unanswerable(first, cell)
        if failure is not None or cell is None:
            for variant in group:
                session.store.set_status(variant.key(), "failed", failure=failure, wall_s=0.0, gpu_minutes=0.0)
                session.emit(f"FAILED {variant.name}: {failure.klass if failure else 'not_in_table'} (replay)")
                session.skip_all(variant)
                session.progress.variant_done()
            return
        warm = (cell.cache_key or cell.id) in self._started
        self._started.add(cell.cache_key or cell.id)
        launch_s = cell.launch_s(warm) + cell.warmup_s
        session.progress.launched(launch_s)
        ran_on = (
            f"replay of {self.table.name} ({'synthetic table' if self.table.synthetic else 'measured'}: {cell.id}, "
        )
        ran_on += f"{'warm' if warm and cell.warm_ready_s is not None else cell.compile_cache} start)"
        facts = {"engine": first.config.engine, **cell.facts}
        for position, variant in enumerate(group):
            charged = launch_s if position == 0 else 0.0
            session.store.set_status(variant.key(), "running", launch_s=launch_s, facts=facts, ran_on=ran_on)
            wall = charged + self._runs(session, variant, cell)
            session.store.set_status(
                variant.key(), "done", wall_s=wall, gpu_minutes=gpu_minutes(self.exp, variant, wall)
            )
            session.progress.variant_done()

    def _unanswerable(self, variant: Variant, cell: TableVariant | None) -> Failure | None:
        if cell is None:
            engine = variant.config.engine
            asked = {f: variant.config.flags.get(f) for f in self.table.factor_flags(engine)}
            return Failure(
                klass="not_in_table",
                excerpt=f"{self.table.name} has no measured variant with {asked}",
                hint=f"its factors take {self.table.factors}: keep the experiment's values to those, or measure "
                "the cell and add it to the table",
            )
        if cell.outcome != "ready":
            return Failure(
                klass=cell.outcome,
                excerpt=f"{self.table.name}: {cell.id} did not start when it was measured ({cell.outcome})",
            )
        return None

    def _runs(self, session: LaunchSession, variant: Variant, cell: TableVariant) -> float:
        """Stores every probe × repeat not stored yet, each a seeded draw of a measured repeat; their seconds."""
        done = session.store.finished_runs(variant.key())
        repeats = variant.repeats or self.exp.suite.repeats
        spent = 0.0
        for name in self.exp.suite.probes.enabled():
            if not applies(self.exp.suite.probes.params(name), variant):
                session.progress.skip(name, repeats)
                continue
            probe = self.probes[name]
            measured, numbers = cell.repeats.get(probe, []), self.table.repeat_numbers(probe)
            for repeat in range(repeats):
                if (name, repeat) in done:
                    session.progress.skip(name)
                    continue
                if not measured:
                    result = ProbeResult(probe=name, ok=False, error=f"{cell.id} has no {probe} repeat")
                    seconds = 0.0
                else:
                    k = random.Random(f"{self.seed}/{draw_set(variant)}/{name}/{repeat}").choice(numbers)
                    on_k = [r for r in measured if r.repeat == k]
                    drawn = random.Random(f"{self.seed}/{variant.key()}/{name}/{repeat}").choice(on_k or measured)
                    result = ProbeResult(
                        probe=name,
                        ok=drawn.ok,
                        figures=dict(drawn.figures),
                        draw=f"{self.table.name} {probe} repeat {drawn.repeat}",
                        requests=drawn.completed + drawn.failed,
                        failed_requests=drawn.failed,
                        notes=[
                            f"replayed: {self.table.name} {cell.id} {probe} repeat {drawn.repeat}"
                            + (f" (launch {drawn.launch})" if drawn.launch > 1 else "")
                        ],
                        error=None if drawn.ok else drawn.outcome,
                    )
                    seconds = drawn.wall_s
                session.store.add_run(
                    RunResult(variant_key=variant.key(), probe=name, repeat=repeat, result=result, wall_s=seconds)
                )
                session.progress.ran(name, seconds)
                spent += seconds
        return spent


def probe_map(exp: Experiment, table: ReplayTable) -> dict[str, str]:
    """Each probe of the suite → the table probe that answers it; a probe the table cannot answer is an error
    naming what the table has."""
    out = {}
    for name in exp.suite.probes.enabled():
        params = exp.suite.probes.params(name)
        dumped: dict[str, Any] = params.model_dump(mode="json") if params is not None else {}
        found = table.probe_for(dumped) if name == REPLAYED_PROBE else None
        if found is None:
            raise ServetuneError(
                f"executor replay: the table {table.path} has no measurement of suite.probes.{name}"
                + (f" with these settings ({dumped})" if name == REPLAYED_PROBE else ""),
                f"a table answers {REPLAYED_PROBE} probes of the loads it measured: {table.probe_choices()}",
            )
        out[name] = found
    return out
