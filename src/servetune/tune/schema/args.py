"""`servetune tune`'s arguments (`TuneArgs`): the experiment file and what to do with it, and where its launches
run; the one owner of the command's flags and defaults (its options are generated from these fields, so this
module stays light). The executor options override the file's `executor:` (`loader.with_executor`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ExecutorKind = Literal["local", "local-gpus", "ray", "replay"]
"""Where an experiment's launches run (its `executor: kind`, or `tune --executor`)."""


class TuneArgs(BaseModel):
    """Everything `servetune tune` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    experiment: Path = Field(
        description="Experiment file (YAML); see docs/experiment.md", json_schema_extra={"argument": True}
    )
    out: Path | None = Field(
        None, description="Experiment folder (default: runs/<name>)", json_schema_extra={"flags": ["--out", "-o"]}
    )
    resume: bool = Field(
        False, description="Continue an interrupted run; finished runs are kept", json_schema_extra={"negatable": False}
    )
    retry_failed: bool = Field(
        False,
        description="Resume, and run variants that failed (a transient crash) again",
        json_schema_extra={"negatable": False},
    )
    check: bool = Field(
        False,
        description="Only validate the file and print the plan (nothing launches)",
        json_schema_extra={"negatable": False},
    )
    as_json: bool = Field(
        False,
        description="With --check: print the plan as JSON",
        json_schema_extra={"flags": ["--json"], "negatable": False},
    )
    executor: ExecutorKind | None = Field(
        None,
        description="Where launches run: local (one at a time, here), local-gpus (side by side on this host's GPUs), "
        "ray (as Ray tasks on a cluster's nodes), replay (answered from the measured table the file's "
        "`executor: table` names); default: the file's `executor`, else local",
    )
    gpus: str | None = Field(None, description="local-gpus: the GPU ids to share out, e.g. 0,1,2,3")
    ray_address: str | None = Field(None, description="ray: the cluster's address (default RAY_ADDRESS, else auto)")
    ray_resource: str | None = Field(
        None, description="ray: the resource a launch asks for per GPU (default GPU; a custom one on CPUs)"
    )

    def folder(self, name: str) -> Path:
        """The experiment folder of an experiment of this name."""
        return self.out or Path("runs") / name
