"""Variants: one engine config plus client settings to run the suite on, and the generators that make them
(a matrix of single changes against a baseline, a Cartesian grid).  Search and stages build on these.

The experiment's flags were read once where they entered (`checks.read_flags`): a change, a grid point and a
search point hold canonical names and typed values, so a change is applied by plain replacement."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from servetune.engines.commands import parse_command
from servetune.engines.config import EngineConfig
from servetune.engines.flagtable import FlagValue
from servetune.load.backend import ClientSpec
from servetune.tune.schema.experiment import Change, Experiment, Grid, Matrix

CLIENT_PREFIX = "client."
"""A grid dimension named `client.<field>` varies a client setting (no engine restart) instead of a flag."""


class Variant(BaseModel):
    """One cell of an experiment: what to launch and how the suite talks to it."""

    model_config = ConfigDict(frozen=True)

    name: str
    stage: str = "main"
    config: EngineConfig
    client: ClientSpec
    changes: dict[str, Any] = Field(default_factory=dict, description="What differs from the stage's baseline.")
    baseline: bool = False
    note: str | None = None
    repeats: int | None = Field(default=None, ge=1, description="Repeats of every probe (None: the suite's).")
    confirms: str | None = Field(
        default=None, description="The key of the variant this one re-measures with fresh repeats (a finalist)."
    )
    served: EngineConfig | None = Field(
        default=None,
        description="The config as `plan` serves it on the experiment's GPUs (the planner's serve flags, decided "
        "with its verdict before the launch): what the recommendation prints. None where the planner did not plan it.",
    )

    def key(self) -> str:
        """Identity of the measurement: the stage and the variant's name (names are unique within a stage, so
        two declared variants with equal configs are both measured and reported, each under its own name; a
        later stage re-measures its baseline next to its own variants rather than trusting an earlier run)."""
        return hashlib.sha256(json.dumps([self.stage, self.name]).encode()).hexdigest()[:12]

    def launch_key(self) -> str:
        """Variants with equal launch keys share one engine start."""
        return self.config.key()

    def measurement_key(self) -> str:
        """Variants with equal launch and client settings measure the same thing (reports say so)."""
        blob = json.dumps([self.config.key(), self.client.model_dump(mode="json")], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def base_config(exp: Experiment) -> EngineConfig:
    """The experiment's base launch (the first stage's baseline)."""
    spec = exp.engine
    if spec.command is not None:
        parsed = parse_command(spec.command, version=spec.version, allow_unknown=exp.allow_unknown_flags)
        return parsed.model_copy(
            update={
                "served_model_name": spec.served_model_name or parsed.served_model_name,
                "env": {**parsed.env, **spec.env},
            }
        )
    assert spec.model is not None  # the schema asks for a model or a command
    return EngineConfig(
        engine=spec.engine,
        model=spec.model,
        served_model_name=spec.served_model_name,
        flags=_clean(spec.flags),
        env=spec.env,
        version=spec.version,
    )


def _clean(flags: dict[str, FlagValue]) -> dict[str, FlagValue]:
    return {k: v for k, v in flags.items() if v is not None}


def apply_change(config: EngineConfig, client: ClientSpec, change: Change) -> tuple[EngineConfig, ClientSpec]:
    """The base with a change applied; a flag set to None is removed (the engine's default applies).
    A change of engine starts from no flags: the base's flags belong to the other engine."""
    switching = change.engine is not None and change.engine != config.engine
    flags = _clean(dict(change.flags) if switching else {**config.flags, **change.flags})
    env = dict(change.env) if switching else {**config.env, **change.env}
    update: dict[str, Any] = {"flags": flags, "env": env}
    if change.engine is not None:
        update["engine"] = change.engine
    if change.model is not None:
        update["model"] = change.model
    new_client = client.model_copy(update=change.client) if change.client else client
    return config.model_copy(update=update), ClientSpec.model_validate(new_client.model_dump())


def describe_change(change: Change) -> dict[str, Any]:
    """The change as one flat mapping for tables: flags by canonical name (as every config holds them),
    engine/model/env/client prefixed."""
    out: dict[str, Any] = dict(change.flags)
    if change.engine:
        out["engine"] = change.engine
    if change.model:
        out["model"] = change.model
    out.update({f"env.{k}": v for k, v in change.env.items()})
    out.update({f"{CLIENT_PREFIX}{k}": v for k, v in change.client.items()})
    return out


def matrix_variants(base: EngineConfig, client: ClientSpec, matrix: Matrix, stage: str = "main") -> list[Variant]:
    """The baseline, then each change on its own (seed 001's round 2)."""
    variants = [Variant(name=matrix.baseline, stage=stage, config=base, client=client, baseline=True)]
    for name, change in matrix.changes.items():
        config, new_client = apply_change(base, client, change)
        variants.append(
            Variant(
                name=name,
                stage=stage,
                config=config,
                client=new_client,
                changes=describe_change(change),
                note=change.note,
            )
        )
    return variants


def grid_variants(base: EngineConfig, client: ClientSpec, grid: Grid, stage: str = "main") -> list[Variant]:
    """Every combination of the grid's values, in declaration order; the first combination is the baseline
    that deltas are taken against."""
    names = list(grid.flags)
    variants = []
    for index, values in enumerate(itertools.product(*(grid.flags[n] for n in names))):
        picked: dict[str, FlagValue] = dict(zip(names, values, strict=True))
        change = change_from_point(picked)
        config, new_client = apply_change(base, client, change)
        variants.append(
            Variant(
                name=point_name(picked),
                stage=stage,
                config=config,
                client=new_client,
                changes=describe_change(change),
                baseline=index == 0,
            )
        )
    return variants


def change_from_point(point: dict[str, Any]) -> Change:
    """A grid or search point (flag names, `client.` fields) as a Change."""
    flags = {k: v for k, v in point.items() if not k.startswith(CLIENT_PREFIX)}
    client = {k.removeprefix(CLIENT_PREFIX): v for k, v in point.items() if k.startswith(CLIENT_PREFIX)}
    return Change(flags=flags, client=client)


def point_name(point: dict[str, Any]) -> str:
    """A readable variant name, e.g. `max-num-seqs=4,kv-cache-dtype=fp8`."""
    return ",".join(f"{k.removeprefix(CLIENT_PREFIX)}={_short(v)}" for k, v in point.items())


def _short(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
