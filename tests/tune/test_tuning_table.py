"""The tuning table's driver (benchmarks/tuning_table/): a driver relaunched on the same device measures only what
no earlier launch there finished and writes where no earlier launch did. The driver runs in its dry run (the same
decisions and files on a virtual clock); no engine runs here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import servetune

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "benchmarks" / "tuning_table"
A, B, C = "kv-auto_mnbt-8192_mns-256", "kv-auto_mnbt-8192_mns-64", "kv-fp8_mnbt-8192_mns-64"
ENV = {**os.environ, "PYTHONPATH": str(Path(servetune.__file__).parents[1])}


def drive(out: Path, variants: list[str], done_from: Path) -> list[str]:
    """One launch of the driver's dry run; the variants its plan measures."""
    subprocess.run(
        [
            sys.executable,
            str(TABLE / "run_table.py"),
            "--out",
            str(out),
            "--done-from",
            str(done_from),
            "--variants",
            ",".join(variants),
            "--dry-run",
            "--dry-budget-s",
            "5000",
            "--deadline-file",
            str(out.parent / "no-deadline"),
            "--pid-file",
            str(out.parent / "vllm.pid"),
        ],
        check=True,
        capture_output=True,
        env=ENV,
        timeout=120,
    )
    launches = sorted(out.glob("launch_*"), key=lambda p: int(p.name.split("_")[1]))
    plan = (launches[-1] if launches else out) / "plan.json"  # `out` itself: the driver before launch folders
    return [s["id"] for s in json.loads(plan.read_text())["startups"]]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_relaunch_measures_only_what_no_launch_finished_and_overwrites_nothing(tmp_path: Path) -> None:
    """On the H200 a relaunch in the same device session measured kv-fp8_mnbt-8192_mns-256 again (its data were
    not committed yet) and overwrote the first launch's files of it."""
    out, data = tmp_path / "dc", tmp_path / "data"
    (data / C / "launch_2").mkdir(parents=True)  # committed: C's first launch was cut short, its second finished
    (data / C / "variant.json").write_text(json.dumps({"id": C, "done": False}))
    (data / C / "launch_2" / "variant.json").write_text(json.dumps({"id": C, "done": True}))

    assert drive(out, [A], data) == [A]
    first = files(out / "launch_1")
    assert drive(out, [A, B, C], data) == [B], "A done by launch 1 of this session, C by the committed data"
    assert f"{A}/variant.json" in first and files(out / "launch_1") == first, "launch 1's files untouched"
    assert (out / "launch_2" / B / "variant.json").is_file() and not (out / "launch_2" / A).exists()
    assert (out / "DONE").is_file(), "poll.sh's marker, in the session's folder"

    cut = out / "launch_2" / B / "variant.json"  # as if launch 2 had been cut short inside B
    cut.write_text(json.dumps({**json.loads(cut.read_text()), "done": False}))
    second = files(out / "launch_2")
    assert drive(out, [A, B], data) == [B], "a variant no launch finished is measured again"
    assert files(out / "launch_2") == second and (out / "launch_3" / B / "variant.json").is_file()
    plan = json.loads((out / "launch_3" / "plan.json").read_text())
    assert not plan["startups"][0]["cold"], "a relaunch's first start is on a machine that has run before"
