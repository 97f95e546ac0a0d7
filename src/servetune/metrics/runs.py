"""A bench folder: measured runs, each in servetune's own run file, whatever tool made it.

A run file (`<name>.servetune.json`) holds where the run came from (`RunSource`: servetune, vLLM bench serve,
GuideLLM or AIPerf, with its file), its load level, the figures under vLLM's flat names as that tool reported them,
the summary servetune recomputes from the records with vLLM's definitions when per-request data exists
(`<name>.records.jsonl`, one `RequestRecord` per line), and the engine's split of the run's TTFT for servetune's own
runs of an engine with vLLM's histograms. `servetune bench --save-result` writes one per run next to
vLLM's result JSON; `servetune import` converts other tools' files into one; `servetune report DIR` reads them
(and other tools' files lying in DIR) and draws the bench report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from servetune.errors import ServetuneError, from_validation_error
from servetune.fileio import atomic_write_text
from servetune.humanize import number
from servetune.metrics.engine_time import EngineTime
from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import Summary, summarize

RUN_SUFFIX = ".servetune.json"
RECORDS_SUFFIX = ".records.jsonl"
Tool = Literal["servetune", "vllm", "guidellm", "aiperf"]
TOOL_NAMES: dict[str, str] = {
    "servetune": "servetune bench",
    "vllm": "vllm bench serve",
    "guidellm": "GuideLLM",
    "aiperf": "AIPerf",
}


class RunSource(BaseModel):
    """Where a run came from and what load it ran."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: Tool
    path: str
    """The file it was read from (servetune's own run file for servetune's runs)."""
    label: str
    """A run's name in the report: the series it belongs to (a sweep's levels share it)."""
    model: str | None = None
    kind: Literal["concurrency", "rate"] | None = None
    level: float | None = None
    """Requests in flight (concurrency) or requests per second (rate; inf = all at once)."""
    started_at: str | None = None
    notes: tuple[str, ...] = ()
    """What the reader had to assume (an approximated ITL, a missing field)."""
    content_sha256: str | None = None
    """sha256 of the file an imported run was read from (`#N` added for the N-th run of a file of several): the
    same result imported twice is the same run, whatever the file is called now."""

    @property
    def level_text(self) -> str:
        if self.level is None:
            return "—"
        if self.level == float("inf"):
            return "c∞" if self.kind == "concurrency" else "rate ∞"
        level = f"{self.level:.0f}" if self.level == round(self.level) else number(self.level)
        return f"c{level}" if self.kind == "concurrency" else f"{level} req/s"


class BenchRun(BaseModel):
    """One measured run (see the module docstring)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    source: RunSource
    figures: dict[str, float]
    """vLLM-named figures as the tool reported them (`request_throughput`, `p99_ttft_ms`, ...)."""
    summary: Summary | None = None
    """servetune's summary of `records` (vLLM's definitions), when the run has per-request data."""
    records: list[RequestRecord] = []
    settings: dict[str, Any] = {}
    """The tool's own description of the load (servetune: shape and workload), kept as it was."""
    engine_time: EngineTime | None = None
    """The engine's own split of the run's TTFT, from its `/metrics` around the run (servetune's runs against
    vLLM or the simulator; `metrics/engine_time.py`)."""

    @classmethod
    def of(
        cls,
        source: RunSource,
        figures: dict[str, float],
        records: Sequence[RequestRecord] | None,
        settings: dict[str, Any] | None = None,
        percentiles: Iterable[float] = (50, 90, 95, 99),
    ) -> BenchRun:
        """A run with its summary recomputed from `records` when there are any."""
        summary = summarize(records, percentiles=percentiles) if records else None
        return cls(
            source=source, figures=figures, summary=summary, records=list(records or []), settings=settings or {}
        )

    @property
    def name(self) -> str:
        return f"{self.source.label} {self.source.level_text}" if self.source.level is not None else self.source.label

    def figure(self, key: str) -> float | None:
        """A vLLM-named figure: servetune's recomputed one when the run has records, else the tool's own."""
        if self.summary is not None:
            from servetune.metrics.vllm_format import figures_of

            value = figures_of(self.summary).get(key)
            if value is not None:
                return value
        return self.figures.get(key)


def run_stem(path: Path) -> str:
    """The name a run's files share (`x.servetune.json` → `x`)."""
    name = path.name
    for suffix in (RUN_SUFFIX, RECORDS_SUFFIX, ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def write_run(folder: Path, stem: str, run: BenchRun) -> Path:
    """Writes a run's file and its records next to each other (atomically); returns the run file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}{RUN_SUFFIX}"
    body = {
        "servetune_run": 1,
        "source": run.source.model_dump(mode="json"),
        "figures": run.figures,
        "summary": run.summary.model_dump(mode="json") if run.summary else None,
        "settings": run.settings,
        "engine_time": run.engine_time.model_dump(mode="json") if run.engine_time else None,
    }
    if run.records:
        atomic_write_text(folder / f"{stem}{RECORDS_SUFFIX}", "".join(r.model_dump_json() + "\n" for r in run.records))
    atomic_write_text(path, json.dumps(body, indent=2, default=str))
    return path


def read_run(path: Path, data: dict[str, Any] | None = None) -> BenchRun:
    """Reads a servetune run file (and its records file, when there is one)."""
    body = data if data is not None else _json(path)
    try:
        source = RunSource.model_validate(body["source"])
        summary = Summary.model_validate(body["summary"]) if body.get("summary") else None
        split = EngineTime.model_validate(body["engine_time"]) if body.get("engine_time") else None
    except ValidationError as err:
        raise from_validation_error(
            err, where=f"{path} is not a servetune run file", fix="give a file written by servetune"
        ) from None
    except (KeyError, TypeError) as err:
        raise ServetuneError(f"{path} is not a servetune run file: {err}", "give a file written by servetune") from None
    records = read_records(path.with_name(run_stem(path) + RECORDS_SUFFIX))
    return BenchRun(
        source=source,
        figures={k: float(v) for k, v in (body.get("figures") or {}).items() if isinstance(v, int | float)},
        summary=summary,
        records=records,
        settings=body.get("settings") or {},
        engine_time=split,
    )


def read_records(path: Path) -> list[RequestRecord]:
    """The records of a JSONL file (none when it does not exist)."""
    if not path.is_file():
        return []
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ServetuneError(f"cannot read {path}: {err}", "remove the file or write it again") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(RequestRecord.model_validate_json(line))
        except ValidationError as err:
            raise from_validation_error(
                err, where=f"{path} line {n} is not a servetune request record", fix="remove it"
            ) from None
    return out


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ServetuneError(
            f"cannot read {path} as JSON: {err}", "give a run file written by a benchmark tool"
        ) from None
