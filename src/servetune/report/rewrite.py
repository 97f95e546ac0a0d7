"""`servetune report`: rebuilds an experiment folder's reports from its store alone, or draws the bench report of
measured runs — a bench folder (`bench --save-result --result-dir`, `servetune import --into`), any folder holding
result files of vLLM bench serve / bench sweep, GuideLLM or AIPerf, or such files given one by one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servetune.errors import ServetuneError
from servetune.metrics.imports import AIPERF_RECORDS, AIPERF_SUMMARY, find_runs, read_runs
from servetune.metrics.runs import BenchRun
from servetune.report.bench import write_bench_report
from servetune.report.files import write_ranked
from servetune.tune.results.rank import rank
from servetune.tune.results.store import STORE_NAME, Store
from servetune.tune.schema.experiment import Experiment


def write_report(paths: Sequence[Path], out: Path | None = None) -> dict[str, Path]:
    """The reports of what `paths` hold: one experiment folder's tuning reports, else the bench report of every
    run found (written to `out`, by default the one folder given or the folder of the first file)."""
    if len(paths) == 1 and (paths[0] / STORE_NAME).is_file():
        return rewrite_reports(paths[0])
    runs: list[BenchRun] = []
    for path in paths:
        if not path.exists():
            raise ServetuneError(f"{path} does not exist", "give an experiment folder, a bench folder or result files")
        runs += find_runs(path) if path.is_dir() and not _aiperf_folder(path) else read_runs(path)
    if not runs:
        raise ServetuneError(
            f"{', '.join(map(str, paths))} holds no servetune results: no {STORE_NAME} and no run files",
            "give the --out folder of `servetune tune`, the --result-dir of `servetune bench --save-result`, or result "
            "files of vllm bench serve (--save-result), GuideLLM (benchmarks.json) or AIPerf (profile_export*)",
        )
    folder = out or (paths[0] if paths[0].is_dir() else paths[0].parent)
    folder.mkdir(parents=True, exist_ok=True)
    title = folder.resolve().name if len(paths) == 1 and paths[0].is_dir() else f"{len(runs)} runs"
    return write_bench_report(folder, runs, title)


def _aiperf_folder(path: Path) -> bool:
    return (path / AIPERF_SUMMARY).is_file() or (path / AIPERF_RECORDS).is_file()


def rewrite_reports(folder: Path) -> dict[str, Path]:
    """Ranks what the store holds (finished or not) and writes every report file again."""
    path = folder / STORE_NAME
    store = Store(path, readonly=True)
    try:
        exp = Experiment.model_validate(store.meta("experiment"))
        records = store.records()
    finally:
        store.close()
    return write_ranked(folder, exp, records, rank(exp, records))
