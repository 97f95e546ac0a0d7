"""`servetune report`: rebuilds an experiment folder's reports from its store alone, or draws the bench report of
measured runs — a bench folder (`bench --save-result --result-dir`, `servetune import --into`), any folder holding
result files of vLLM bench serve / bench sweep, GuideLLM or AIPerf, or such files given one by one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from servetune.errors import ServetuneError
from servetune.metrics.imports import AIPERF_RECORDS, AIPERF_SUMMARY, find_runs, read_runs
from servetune.metrics.runs import BenchRun
from servetune.report.bench import write_bench_report
from servetune.report.files import write_ranked
from servetune.tune.results.rank import rank
from servetune.tune.results.store import STORE_NAME, Store
from servetune.tune.schema.experiment import Experiment

BENCH_BESIDE = "bench-report.html"
"""The bench report's name in a folder whose report.html is an experiment's (its runs.csv lies beside it)."""


def write_report(paths: Sequence[Path], out: Path | None = None) -> dict[str, Path]:
    """The reports of what `paths` hold: one experiment folder's tuning reports (in `out` when given), else the
    bench report of every run found (written to `out`, by default the one folder given or the folder of the first
    file). An experiment's report.html is never written over by a bench report: in an experiment's folder that
    one is `bench-report.html`."""
    if len(paths) == 1 and (paths[0] / STORE_NAME).is_file():
        return rewrite_reports(paths[0], out)
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
    title = folder.resolve().name if len(paths) == 1 and paths[0].is_dir() else f"{len(runs)} runs"
    html = folder / BENCH_BESIDE if (folder / STORE_NAME).is_file() else None
    with _writable(folder):
        folder.mkdir(parents=True, exist_ok=True)
        return write_bench_report(folder, runs, title, html)


def _aiperf_folder(path: Path) -> bool:
    return (path / AIPERF_SUMMARY).is_file() or (path / AIPERF_RECORDS).is_file()


@contextmanager
def _writable(folder: Path) -> Iterator[None]:
    """A folder the reports cannot be written in (read-only, full) is the user's to change: name it and --out."""
    try:
        yield
    except OSError as err:
        raise ServetuneError(
            f"cannot write the reports in {folder}: {err.strerror or err}",
            "give --out DIR to write them in another folder (the results are only read where they are)",
        ) from None


def rewrite_reports(folder: Path, out: Path | None = None) -> dict[str, Path]:
    """Ranks what the store holds (finished or not) and writes every report file again, in `folder` or `out`."""
    target = out or folder
    if target.resolve() != folder.resolve() and (target / STORE_NAME).is_file():
        raise ServetuneError(
            f"{target} is another experiment's folder: its reports would be written over",
            "give --out a folder of its own",
        )
    path = folder / STORE_NAME
    store = Store(path, readonly=True)
    try:
        exp = Experiment.model_validate(store.meta("experiment"))
        records = store.records()
    finally:
        store.close()
    with _writable(target):
        return write_ranked(target, exp, records, rank(exp, records))
