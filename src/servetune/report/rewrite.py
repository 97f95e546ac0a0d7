"""Rebuilds an experiment folder's reports from its store alone (`servetune report DIR`)."""

from __future__ import annotations

from pathlib import Path

from servetune.errors import ServetuneError
from servetune.report.files import write_ranked
from servetune.tune.experiment import Experiment
from servetune.tune.rank import rank
from servetune.tune.store import STORE_NAME, Store


def rewrite_reports(folder: Path) -> dict[str, Path]:
    """Ranks what the store holds (finished or not) and writes every report file again."""
    path = folder / STORE_NAME
    if not path.is_file():
        raise ServetuneError(
            f"{folder} holds no servetune results ({STORE_NAME} is missing)",
            "give the --out folder of a `servetune tune` run",
        )
    store = Store(path, readonly=True)
    try:
        exp = Experiment.model_validate(store.meta("experiment"))
        records = store.records()
    finally:
        store.close()
    return write_ranked(folder, exp, records, rank(exp, records))
