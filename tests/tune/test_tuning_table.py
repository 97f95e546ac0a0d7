"""The tuning table's driver and filing (benchmarks/tuning_table/): a driver relaunched on the same device measures
only what no earlier launch there finished and writes where no earlier launch did, and every launch of a variant
ends up in the data folder, in launch order, none replacing another. The driver runs in its dry run (the same
decisions and files on a virtual clock); no engine runs here."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
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


def tar_of(session: Path, into: Path) -> Path:
    """The tar poll.sh writes: the session's output folder as `dc/`."""
    with tarfile.open(into, "w:gz") as tar:
        tar.add(session, arcname="dc")
    return into


def collect(tar: Path, data: Path, tmp: Path) -> str:
    return subprocess.run(
        [sys.executable, str(TABLE / "collect.py"), str(tar), "--data", str(data), "--tmp", str(tmp)],
        check=True,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    ).stdout


def test_every_launch_of_a_variant_is_filed_in_launch_order(tmp_path: Path) -> None:
    """Two device sessions measured A (the first's data not committed before the second ran); their tars are
    collected out of order, one of them twice, and one as a driver before launch folders wrote it (one flat
    `dc/`): A's two launches are both kept, the earlier first, and a launch brought back again is not added."""
    none = tmp_path / "none"
    drive(tmp_path / "s1" / "dc", [A], none)
    drive(tmp_path / "s2" / "dc", [A, B], none)
    t1, t2 = tar_of(tmp_path / "s1" / "dc", tmp_path / "t1.tgz"), tar_of(tmp_path / "s2" / "dc", tmp_path / "t2.tgz")
    flat = tmp_path / "flat" / "dc"
    shutil.copytree(tmp_path / "s1" / "dc" / "launch_1", flat)
    t1_flat = tar_of(flat, tmp_path / "t1_flat.tgz")
    data = tmp_path / "data"
    work = tmp_path / "collect"

    assert "launch 1 of 1 (added)" in collect(t2, data, work)
    assert "launch 1 of 2 (added)" in collect(t1, data, work), "the earlier launch goes first"
    assert "brought back again" in collect(t1_flat, data, work)
    assert "brought back again" in collect(t2, data, work)
    started = [
        json.loads((tmp_path / s / "dc" / "launch_1" / "manifest.json").read_text())["started"] for s in ("s1", "s2")
    ]
    filed = [json.loads((f / "variant.json").read_text()) for f in (data / A, data / A / "launch_2")]
    assert [v["session_started"] for v in filed] == started
    assert not (data / A / "launch_3").exists() and not (data / B / "launch_2").exists()
    assert (data / A / "warmup.summary.json").is_file() and (data / A / "launch_2" / "warmup.summary.json").is_file()
    sessions = sorted(p.name for p in (data / "sessions").iterdir())
    assert len(sessions) == 2, f"one folder per launch, {sessions}"


def test_the_table_holds_every_launch_and_a_warm_relaunch_is_its_warm_start(tmp_path: Path) -> None:
    """table.csv has each launch's repeats (its `launch`, and `repeat` = the load draw k); variants.csv's start is
    the first launch's as it happened, and a later launch that started warm is the variant's `warm_ready_s`."""
    s1 = tmp_path / "s1" / "dc"
    drive(s1, [A], tmp_path / "none")
    data = tmp_path / "data"
    shutil.copytree(s1 / "launch_1" / A, data / A)
    drive(tmp_path / "s2" / "dc", [A], tmp_path / "none")
    shutil.copytree(tmp_path / "s2" / "dc" / "launch_1" / A, data / A / "launch_2")
    relaunch = data / A / "launch_2" / "variant.json"
    v = json.loads(relaunch.read_text())
    relaunch.write_text(json.dumps({**v, "ready_s": 79.08, "startup_facts": {"compile_cache": "warm"}}))
    subprocess.run(
        [sys.executable, str(TABLE / "build_table.py"), "--data", str(data), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        env=ENV,
        timeout=120,
    )
    with open(tmp_path / "table.csv", newline="") as f:
        rows = [(r["launch"], r["probe"], r["repeat"]) for r in csv.DictReader(f) if r["variant"] == A]
    assert sorted(rows) == sorted((n, p, k) for n in "12" for p in ("a_tput", "b_goodput", "c_tpot") for k in "123")
    with open(tmp_path / "variants.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    first = json.loads((data / A / "variant.json").read_text())
    assert (row["launches"], row["ready_s"], row["warm_ready_s"]) == ("2", str(first["ready_s"]), "79.08")
    assert row["starts"] == f"{first['ready_s']} ?; 79.08 warm"
