"""`servetune report`'s arguments (`ReportArgs`): what to draw and where; the one owner of the command's flags
(its options are generated from these fields, so this module stays light)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ReportArgs(BaseModel):
    """Everything `servetune report` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    paths: tuple[Path, ...] = Field(
        description="An experiment folder (`servetune tune --out`), a bench folder (`bench --save-result "
        "--result-dir`), or result files of vllm bench serve, GuideLLM or AIPerf",
        json_schema_extra={"argument": True},
    )
    out: Path | None = Field(
        None,
        description="Where the reports go (default: the folder; a bench report in an experiment's folder is "
        "bench-report.html)",
        json_schema_extra={"flags": ["--out", "-o"]},
    )
