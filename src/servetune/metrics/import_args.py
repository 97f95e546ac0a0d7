"""`servetune import`'s arguments (`ImportArgs`): other tools' result files and the bench folder they go into; the
one owner of the command's flags (its options are generated from these fields, so this module stays light;
`metrics/imports.py` `import_files` imports)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ImportArgs(BaseModel):
    """Everything `servetune import` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    files: tuple[Path, ...] = Field(
        description="Result files: vllm bench serve --save-result JSON, a vllm bench sweep folder's run=N.json, "
        "GuideLLM benchmarks.json, AIPerf profile_export_aiperf.json / profile_export.jsonl (or their folder)",
        json_schema_extra={"argument": True},
    )
    into: Path = Field(description="The bench folder to add them to (created if missing)")
    force: bool = Field(
        False,
        description="Import a result again even if the folder has it already",
        json_schema_extra={"negatable": False},
    )
