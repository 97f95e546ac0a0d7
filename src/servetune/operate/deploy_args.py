"""`servetune deploy`'s arguments (`DeployArgs`): the one owner of its flags, defaults, units and bounds, and of
the targets it writes. The command's options are generated from these fields, so this module stays light;
`operate/deploy.py` `deploy` does what they ask."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from servetune.errors import ServetuneError
from servetune.metrics.slo import parse_slos

TARGETS = ("compose", "kubernetes", "systemd")
MAX_GPUS = 64
"""GPUs per replica: more than one host holds is a typo."""
MAX_COLD_START_S = 86_400.0
"""A cold start longer than a day is a typo (or 1e308): the startup budgets derived from it would be meaningless."""


def parse_targets(values: Iterable[str]) -> tuple[str, ...]:
    """The targets of `--target` values: each a target, `all`, or a comma-separated list of them; a repeated
    `--target` adds to the list (the order of TARGETS, each once). None given means all."""
    chosen: set[str] = set()
    given = [part.strip() for value in values for part in value.split(",")]
    for name in given:
        if name == "all":
            chosen |= set(TARGETS)
        elif name in TARGETS:
            chosen.add(name)
        else:
            raise ServetuneError(
                f"unknown --target {name!r}",
                f"use {', '.join(TARGETS)} or all, one per --target or comma-separated (--target compose,systemd)",
            )
    return tuple(t for t in TARGETS if t in chosen) if given else TARGETS


class DeployArgs(BaseModel):
    """Everything `servetune deploy` takes: what to deploy, which files, and the numbers SOURCE may lack."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    source: Path = Field(
        description="Tuning folder, engine config file, or a plan JSON (plan --json)",
        json_schema_extra={"argument": True},
    )
    target: tuple[str, ...] = Field(
        TARGETS, description=f"Files to write: {', '.join(TARGETS)} or all", json_schema_extra={"flags": ["--target"]}
    )
    out: Path | None = Field(None, description="Output folder (default: SOURCE/deploy for a folder, else ./deploy)")
    gpu: str | None = Field(
        None, description="GPU type, NAME[xN] as plan takes it (default: from the tuning folder or plan)"
    )
    gpus: int | None = Field(None, ge=1, le=MAX_GPUS, description="GPUs per replica (or N in --gpu NAMExN)")
    cold_start_s: float | None = Field(
        None,
        gt=0,
        le=MAX_COLD_START_S,
        allow_inf_nan=False,
        description="Measured cold start, when SOURCE has none",
        json_schema_extra={"flags": ["--cold-start-s"]},
    )
    cold_start_source: str | None = Field(None, description="Where --cold-start-s came from (one line)")
    name: str = Field("servetune", description="Name of the deployment, its services and its unit")
    slo: tuple[str, ...] = Field(
        (), description="An SLO the alerts use, NAME=VALUE as in an experiment's slos, e.g. ttft_p99_ms=500"
    )

    @field_validator("target")
    @classmethod
    def _targets(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return parse_targets(values)

    @field_validator("slo")
    @classmethod
    def _slos(cls, items: tuple[str, ...]) -> tuple[str, ...]:
        parse_slos(items)
        return items

    def slos(self) -> dict[str, float]:
        """`ttft_p99_ms=500` items → {"ttft_p99_ms": 500.0}, each read and bounded by `parse_slos`."""
        return parse_slos(self.slo)

    def dest(self) -> Path:
        return self.out or (self.source / "deploy" if self.source.is_dir() else Path("deploy"))
