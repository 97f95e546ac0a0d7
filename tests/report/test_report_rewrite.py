"""`servetune report` never writes over another command's report (a bench report drawn in an experiment's folder is
`bench-report.html`, beside the experiment's `report.html`), and a folder it cannot write in is a clear error whose
fix, `--out`, writes the reports elsewhere from the results where they are."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.sim_experiment import sim_experiment

DATA = Path(__file__).resolve().parents[1] / "metrics" / "data"
EXPERIMENT = sim_experiment("reported")


def _servetune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servetune", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def experiment_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reported")
    (root / "exp.yaml").write_text(EXPERIMENT)
    done = _servetune("tune", str(root / "exp.yaml"), "--out", str(root / "exp"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return root / "exp"


def test_a_bench_report_in_an_experiment_folder_is_written_beside_its_report(
    experiment_dir: Path, tmp_path: Path
) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(DATA / "vllm_bench_serve_detailed.json", bench)
    before = (experiment_dir / "report.html").read_bytes()
    done = _servetune("report", str(experiment_dir), str(bench))
    assert done.returncode == 0, done.stderr
    assert (experiment_dir / "report.html").read_bytes() == before, "the experiment's report is kept"
    beside = experiment_dir / "bench-report.html"
    assert str(beside) in done.stdout and "vllm bench serve" in beside.read_text()


@contextmanager
def _read_only(folder: Path) -> Iterator[Path]:
    """`folder` read-only: by its mode for a user, by a read-only bind mount for root (whom modes do not stop)."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in (folder, *folder.rglob("*"))}
        for p in modes:
            p.chmod(modes[p] & ~0o222)
        try:
            yield folder
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    view = folder.with_name(folder.name + "-ro")
    view.mkdir()
    bind = subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True)
    if bind.returncode != 0 or subprocess.run(["mount", "-o", "remount,bind,ro", str(view)]).returncode != 0:
        if bind.returncode == 0:
            subprocess.run(["umount", str(view)], check=True)
        view.rmdir()
        pytest.skip("root cannot make a read-only folder here (no bind mount)")
    try:
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)
        view.rmdir()


def test_a_read_only_experiment_folder_is_reported_elsewhere_with_out(experiment_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "exp"
    shutil.copytree(experiment_dir, copy)
    with _read_only(copy) as folder:
        refused = _servetune("report", str(folder))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"cannot write the reports in {folder}" in refused.stderr and "--out" in refused.stderr
        assert "Traceback" not in refused.stderr
        elsewhere = tmp_path / "elsewhere"
        done = _servetune("report", str(folder), "--out", str(elsewhere))
        assert done.returncode == 0, done.stdout + done.stderr
    assert (elsewhere / "report.html").is_file() and (elsewhere / "results.json").is_file()
    assert not (elsewhere / "servetune.db").exists(), "the store is read where it is"
