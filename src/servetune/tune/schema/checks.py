"""Checks an experiment past its structure: flags the engine knows with values of the right kind, SLOs that
can be met and measured, an objective the suite produces.  Pure: returns issues, raises nothing.

This is where an experiment's flags enter: each is read here, once, by the engine vocabulary, and the experiment
comes back holding canonical names and typed values (`max_model_len: 32k` → `max-model-len: 32000`, as vLLM reads
it; `no-enable-prefix-caching: true` → `enable-prefix-caching: false`) in its base, its changes, its grid and its
search space, so variants, the planner and the command lines take the flags as they are."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servetune.engines.commands import parse_command
from servetune.engines.flagtable import FlagValue
from servetune.engines.vocab import normalize_flags
from servetune.errors import ServetuneError
from servetune.load.backend import ClientSpec
from servetune.metrics.slo import is_latency_slo, slo_problem
from servetune.plan.inputs import inputs_from_flags
from servetune.suite.registry import all_probes, get_probe, named_objectives
from servetune.tune.schema.experiment import Dim, Experiment, Grid, Matrix, Search, Stage, Variants
from servetune.tune.schema.footprint import footprint_issues
from servetune.tune.schema.issues import Issue, KeyPath
from servetune.tune.schema.variants import CLIENT_PREFIX


def check_experiment(exp: Experiment) -> tuple[Experiment, list[Issue]]:
    """The experiment with its flags read (canonical names, typed values: what every later step takes), and every
    problem found, each with its key path and fix (none = valid)."""
    exp, issues = read_flags(exp)
    issues += [
        *_objective_issues(exp),
        *_slo_issues(exp),
        *_client_issues(exp),
        *_client_dim_issues(exp),
        *_hardware_issues(exp),
        *_name_issues(exp),
        *_estimate_issues(exp),
        *footprint_issues(exp),
    ]
    return exp, issues or list(_roofline_issues(exp))


def _name_issues(exp: Experiment) -> Iterator[Issue]:
    """A variant's identity is its name: two variants (or stages) of one name would be reported as one."""
    stages = exp.variants.as_stages()
    seen_stages: set[str] = set()
    for s_index, stage in enumerate(stages):
        prefix: KeyPath = ("variants", "stages", s_index) if exp.variants.stages else ("variants",)
        if stage.name in seen_stages:
            yield Issue((*prefix, "name"), f"two stages are named `{stage.name}`", "give every stage its own name")
        if stage.name == "confirm":
            yield Issue(
                (*prefix, "name"),
                "the stage name `confirm` is the finalists' re-measurement's (confirm:)",
                "give the stage another name",
            )
        seen_stages.add(stage.name)
        if stage.matrix and stage.matrix.baseline in stage.matrix.changes:
            yield Issue(
                (*prefix, "matrix", "changes", stage.matrix.baseline),
                f"a change is named like the baseline (`{stage.matrix.baseline}`): both would be one row",
                "rename the change, or the baseline (matrix.baseline)",
            )
        if stage.grid:
            for flag, values in stage.grid.flags.items():
                where = (*prefix, "grid", flag)
                if not values:
                    yield Issue(where, f"grid dimension `{flag}` has no values", "list at least one value")
                texts = [repr(v) for v in values]
                dupes = sorted({t for t in texts if texts.count(t) > 1})
                if dupes:
                    yield Issue(where, f"grid dimension `{flag}` repeats {', '.join(dupes)}", "list each value once")


def _roofline_issues(exp: Experiment) -> Iterator[Issue]:
    """A TPOT bound below the planner's ideal decode step (one stream, weights and KV read at full memory
    bandwidth) can never be met on this hardware; judged only when the model's config.json is at hand."""
    bounds = {k: v for k, v in exp.slos.items() if k.startswith(("tpot_", "itl_"))}
    hardware = exp.hardware.resolved()
    if not bounds or hardware is None or exp.engine.engine not in {"vllm", "sim"}:
        return
    from servetune.plan.api import plan_for
    from servetune.plan.placement import place
    from servetune.tune.schema.variants import base_config

    config = base_config(exp)
    placed = place(hardware, config.flags)
    gpu, count = placed.gpu, placed.gpus
    try:
        plan = plan_for(config, gpu, count, vllm_version=config.version)
    except ServetuneError:
        return
    decode = next((s for s in plan.speeds if s.name.startswith("decode, 1 stream") and s.unit == "tok/s"), None)
    if decode is None or decode.ideal <= 0:
        return
    floor_ms = 1000 / decode.ideal
    for key, bound in bounds.items():
        if bound < floor_ms:
            yield Issue(
                ("slos", key),
                f"{key} = {bound:g} ms can never be met: the fastest possible decode step of this model on "
                f"{count}× {gpu.name} is {floor_ms:.1f} ms ({decode.name}, roofline ideal)",
                f"allow at least {floor_ms * 1.5:.0f} ms (real engines reach 50–80% of the roofline)",
            )


def _hardware_issues(exp: Experiment) -> Iterator[Issue]:
    try:
        exp.hardware.resolved()
    except ServetuneError as err:
        yield Issue(("hardware", "gpu"), err.problem, err.fix or "use a catalog GPU name")


def _objective_issues(exp: Experiment) -> Iterator[Issue]:
    named = named_objectives()
    if isinstance(exp.objective, str) and exp.objective not in named:
        close = difflib.get_close_matches(exp.objective, named, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        yield Issue(("objective",), f"unknown objective `{exp.objective}`", f"{hint}use one of {', '.join(named)}")
        return
    objective = exp.resolved_objective()
    spec = all_probes().get(objective.probe)
    if spec is None:
        yield Issue(
            ("objective", "probe"), f"unknown probe `{objective.probe}`", f"use one of {', '.join(all_probes())}"
        )
        return
    if spec.figure(objective.figure) is None:
        figures = ", ".join(f.name for f in spec.figures)
        yield Issue(
            ("objective", "figure"),
            f"{objective.probe} reports no figure `{objective.figure}`",
            f"use one of {figures}",
        )
    if objective.probe not in exp.suite.probes.enabled():
        yield Issue(
            ("objective",),
            f"the objective needs the `{objective.probe}` probe, which the suite does not run",
            f"add `{objective.probe}:` under suite.probes",
        )


def _slo_issues(exp: Experiment) -> Iterator[Issue]:
    enabled = set(exp.suite.probes.enabled())
    probes = all_probes()
    latency_judges = {n for n in enabled if probes[n].judges_latency_slos}
    for key, value in exp.slos.items():
        path: KeyPath = ("slos", key)
        problem = slo_problem(key, value)
        if problem:
            yield Issue(path, *problem)
            continue
        if is_latency_slo(key):
            metric = key.split("_")[0]
            if not latency_judges and not any(f.slo == metric for n in enabled for f in probes[n].figures):
                yield Issue(path, f"{key} cannot be measured by this suite", "add `load_curve:` under suite.probes")
        elif key == "memory_headroom_pct" and not any(f.slo == key for n in enabled for f in probes[n].figures):
            yield Issue(path, "memory headroom is not measured", "add `memory_headroom:` under suite.probes")


def read_flags(exp: Experiment) -> tuple[Experiment, list[Issue]]:
    """Every flag of the base and of every variant read by the engine vocabulary: unknown names (unless
    allow_unknown_flags), wrong kinds and values vLLM refuses are issues at their keys — known flags are checked
    either way — and the experiment comes back with canonical names and typed values (as written where a flag
    could not be read: such an experiment is refused)."""
    reader = _FlagReader(exp.engine.engine, exp.engine.version, exp.allow_unknown_flags)
    if exp.engine.command is not None:
        try:
            parse_command(exp.engine.command, version=reader.version, allow_unknown=reader.allow_unknown)
        except ServetuneError as err:
            reader.issues.append(Issue(("engine", "command"), err.problem, err.fix or "check the command"))
    engine = exp.engine.model_copy(
        update={"flags": reader.mapping(reader.engine, exp.engine.flags, ("engine", "flags"))}
    )
    variants = exp.variants
    if variants.stages is not None:
        stages = [reader.stage(stage, ("variants", "stages", i)) for i, stage in enumerate(variants.stages)]
        variants = variants.model_copy(update={"stages": stages})
    else:
        variants = reader.stage(variants, ("variants",))
    return exp.model_copy(update={"engine": engine, "variants": variants}), reader.issues


@dataclass
class _FlagReader:
    """Reads flags with the engine vocabulary, each at its key path, collecting what cannot be read as issues."""

    engine: str
    version: str | None
    allow_unknown: bool
    issues: list[Issue] = field(default_factory=list)

    def stage(self, stage: Stage | Variants, prefix: KeyPath) -> Any:
        """A stage (or the variants' single generator) with its matrix, grid or search space read."""
        update: dict[str, Any] = {}
        if stage.matrix:
            update["matrix"] = self.matrix(stage.matrix, (*prefix, "matrix", "changes"))
        if stage.grid:
            update["grid"] = self.grid(stage.grid, (*prefix, "grid"))
        if stage.search:
            update["search"] = self.search(stage.search, (*prefix, "search", "space"))
        return stage.model_copy(update=update)

    def matrix(self, matrix: Matrix, prefix: KeyPath) -> Matrix:
        changes = {}
        for name, change in matrix.changes.items():
            shorthand = not change.model_fields_set & {"env", "client", "note", "engine", "model"}
            path = (*prefix, name) if shorthand else (*prefix, name, "flags")
            flags = self.mapping(change.engine or self.engine, change.flags, path)
            changes[name] = change.model_copy(update={"flags": flags})
        return matrix.model_copy(update={"changes": changes})

    def grid(self, grid: Grid, prefix: KeyPath) -> Grid:
        dims: dict[str, list[FlagValue]] = {}
        for flag, values in grid.flags.items():
            if flag.startswith(CLIENT_PREFIX):
                dims[flag] = values
                continue
            read = [self.value(flag, v, (*prefix, flag, i)) for i, v in enumerate(values)]
            name = next((r[0] for r in read if r is not None), flag)
            dims[name] = [r[1] if r is not None else v for r, v in zip(read, values, strict=True)]
        return grid.model_copy(update={"flags": dims})

    def search(self, search: Search, prefix: KeyPath) -> Search:
        space: dict[str, Dim] = {}
        for flag, dim in search.space.items():
            if flag.startswith(CLIENT_PREFIX):
                space[flag] = dim
                continue
            where = (*prefix, flag)
            if dim.choice is not None:
                read = [self.value(flag, v, where) for v in dim.choice]
                name = next((r[0] for r in read if r is not None), flag)
                choice = [r[1] if r is not None else v for r, v in zip(read, dim.choice, strict=True)]
                space[name] = dim.model_copy(update={"choice": choice})
            else:
                first = self.value(flag, (dim.int_range or dim.float_range or (None,))[0], where)
                space[first[0] if first else flag] = dim
        return search.model_copy(update={"space": space})

    def mapping(self, engine: str, flags: Mapping[str, FlagValue], path: KeyPath) -> dict[str, FlagValue]:
        """A mapping of flags read whole (dotted JSON keys merge, a flag given twice is an issue), after each was
        checked at its own key."""
        each = [self.checked(engine, {name: value}, (*path, name)) for name, value in flags.items()]  # every issue
        if any(read is None for read in each):
            return dict(flags)
        try:
            return normalize_flags(engine, flags, version=self.version, allow_unknown=self.allow_unknown)
        except ServetuneError as err:
            self.issues.append(Issue(path, err.problem, err.fix or "see the engine's --help"))
            return dict(flags)

    def value(self, flag: str, value: FlagValue, where: KeyPath) -> tuple[str, FlagValue] | None:
        """One value of a grid or search dimension as (canonical name, typed value); None when it is an issue."""
        read = self.checked(self.engine, {flag: value}, where)
        return next(iter(read.items())) if read else None

    def checked(self, engine: str, flags: Mapping[str, FlagValue], where: KeyPath) -> dict[str, FlagValue] | None:
        """One flag read and held to the ranges the engine (and the simulator) enforce; None when it is an issue."""
        try:
            read = normalize_flags(engine, flags, version=self.version, allow_unknown=self.allow_unknown)
            given = {k: v for k, v in read.items() if v is not None}
            if engine in ("vllm", "sim"):
                inputs_from_flags(given)
            if engine == "sim":  # the simulator's own ranges (time-scale > 0, acceptance-rate in 0..1, ...)
                from servetune.sim.flags import sim_args

                sim_args(given, model="(checked)")
        except ServetuneError as err:
            self.issues.append(Issue(where, err.problem, err.fix or "see the engine's --help"))
            return None
        return read


def _client_dim_issues(exp: Experiment) -> Iterator[Issue]:
    """Grid dimensions named `client.<field>` vary a client setting: the field must exist, a preset be defined."""
    for s_index, stage in enumerate(exp.variants.as_stages()):
        prefix: KeyPath = ("variants", "stages", s_index) if exp.variants.stages else ("variants",)
        for flag, values in (stage.grid.flags if stage.grid else {}).items():
            if flag.startswith(CLIENT_PREFIX):
                yield from _check_client_dim(exp, flag, values, (*prefix, "grid", flag))


def _check_client_dim(exp: Experiment, name: str, values: Sequence[object], path: KeyPath) -> Iterator[Issue]:
    field = name.removeprefix(CLIENT_PREFIX)
    if field not in ClientSpec.model_fields:
        yield Issue(path, f"unknown client setting `{field}`", f"use one of {', '.join(ClientSpec.model_fields)}")
    elif field == "sampling":
        for i, value in enumerate(values):
            if value is not None and value not in exp.sampling_presets:
                yield Issue((*path, i), f"sampling preset `{value}` is not defined", "define it under sampling_presets")


def _client_issues(exp: Experiment) -> Iterator[Issue]:
    if exp.client.sampling and exp.client.sampling not in exp.sampling_presets:
        yield Issue(
            ("client", "sampling"),
            f"sampling preset `{exp.client.sampling}` is not defined",
            f"define it under sampling_presets (defined: {', '.join(exp.sampling_presets) or 'none'})",
        )


def _profile_device(path: str | None) -> str | None:
    """The device a calibration profile was fitted on (None when there is no readable profile or it names none)."""
    if path is None:
        return None
    from servetune.sim.profile import CalibrationProfile

    try:
        return CalibrationProfile.load(path).device
    except ServetuneError:
        return None


def estimable(exp: Experiment) -> bool:
    """The simulator can run the objective's probe, and the probe reports the objective's figure."""
    objective = exp.resolved_objective()
    spec = get_probe(objective.probe)
    return spec.simulable and spec.figure(objective.figure) is not None


def _estimate_issues(exp: Experiment) -> Iterator[Issue]:
    """`estimate:` needs an objective the simulator predicts, a GPU to simulate and a readable profile."""
    spec = exp.estimate
    if spec.mode == "off":
        return
    from pathlib import Path

    if (not isinstance(exp.objective, str) or exp.objective in named_objectives()) and not estimable(exp):
        objective = exp.resolved_objective()
        choices = ", ".join(name for name, spec in all_probes().items() if spec.simulable)
        yield Issue(
            ("estimate", "mode"),
            f"the simulator cannot predict the objective {objective.label}",
            f"use mode: off, or an objective of a probe it runs ({choices})",
        )
    if (
        exp.hardware.gpu is None
        and not (exp.engine.engine == "sim" and exp.engine.flags.get("gpu"))
        and not _profile_device(spec.calibration)
    ):
        yield Issue(
            ("estimate", "mode"),
            "estimates need the GPU to simulate",
            "set hardware.gpu (e.g. H200), or calibrate on the CPU engine with `servetune calibrate --gpu custom:...`",
        )
    if all(stage.search is not None for stage in exp.variants.as_stages()):
        yield Issue(
            ("estimate", "mode"),
            "estimates judge matrix and grid variants; a search stage picks its own points",
            "use mode: off, or a matrix or grid stage",
        )
    if spec.calibration is not None and not Path(spec.calibration).is_file():
        yield Issue(
            ("estimate", "calibration"),
            f"calibration profile {spec.calibration} does not exist",
            "give a profile JSON written by `servetune calibrate` (e.g. benchmarks/sim_fidelity/profile_*.json)",
        )
