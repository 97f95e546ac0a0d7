"""`servetune demo`'s arguments (`DemoArgs`): where the tuning part goes and how much to run; the one owner of the
command's flags (its options are generated from these fields, so this module stays light; `demo.py` runs it)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class DemoArgs(BaseModel):
    """Everything `servetune demo` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    out: Path = Field(
        Path("runs/demo"),
        description="Experiment folder for the tuning part",
        json_schema_extra={"flags": ["--out", "-o"]},
    )
    fresh: bool = Field(
        False, description="Start over in a new folder instead of resuming", json_schema_extra={"negatable": False}
    )
    plan_only: bool = Field(
        False, description="Only plan the five seed systems (no engines)", json_schema_extra={"negatable": False}
    )
