"""`tune --resume` into a folder whose store is gone refuses (exit 2, naming the store and the fix) instead of
starting again from nothing and writing its results over the earlier run's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.sim_experiment import sim_experiment

EXPERIMENT = sim_experiment("gone")


def test_resume_without_its_store_refuses_and_keeps_the_earlier_results(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    out = tmp_path / "runs" / "gone"
    out.mkdir(parents=True)
    earlier = '{"ranking": ["the earlier run"]}\n'
    (out / "results.json").write_text(earlier)
    done = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(path), "--out", str(out), "--resume"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{out / 'servetune.db'}" in done.stderr and "drop --resume" in done.stderr
    assert "Traceback" not in done.stderr
    assert (out / "results.json").read_text() == earlier, "the earlier run's results are kept"
    assert not (out / "servetune.db").exists(), "nothing started"
