"""`servetune tune --executor ray` on a real local Ray cluster (head + worker node, `fake_gpu: 1` each) with real
llama.cpp engines: the same results as `local`, a driver killed mid-run resumed without repeating a finished run,
and a worker node that dies mid-trial (every process of it killed at once, as when its machine goes down) — its run
recorded failed as `node_lost`, retried on the other node, the experiment finished, no engine left anywhere."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tests.scaleout.cluster import RayCluster
from tests.stats import json_schema

pytestmark = pytest.mark.engine

EXPERIMENT = """
name: scaleout
engine:
  engine: llamacpp
  model: tiny
  flags: {{ctx-size: 6144, parallel: 2, threads: 1}}  # 1-4 slots of whole 256-token blocks (F25)
client: {{endpoint: completions, tokenizer: tiny}}
suite:
  repeats: 2
  warmup_requests: 1
  probes:
    short_latency: {{max_tokens: 8}}
    decode_speed: {{output_tokens: {tokens}}}
objective: decode_tok_s
executor: {{kind: ray, resource: fake_gpu}}
variants:
  matrix:
    baseline: two-slots
    changes:
{changes}
"""
FOUR = "      four-slots: {parallel: 4}\n      one-slot: {parallel: 1}\n      three-slots: {parallel: 3}\n"


def _experiment(tmp_path: Path, tokens: int = 32, changes: str = FOUR) -> Path:
    path = tmp_path / "scaleout.yaml"
    path.write_text(EXPERIMENT.format(tokens=tokens, changes=changes))
    return path


def _tune(exp: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "servetune", "tune", str(exp), "--out", str(out), *extra]


def _runs(db: Path) -> dict[tuple[str, str, int], float]:
    """The finished runs in the store (none while servetune is still creating it)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute("SELECT variant_key, probe, repeat, finished FROM runs").fetchall()
    except sqlite3.OperationalError:
        return {}
    return {(k, p, r): f for k, p, r, f in rows}


def _variants(db: Path) -> list[tuple[str, str, str | None]]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT json_extract(variant, '$.name'), status, ran_on FROM variants").fetchall()
    except sqlite3.OperationalError:
        return []


def _engine_pids(results: dict) -> set[int]:
    """Every engine pid the run recorded: each variant's last launch and its lost ones."""
    texts = [v["ran_on"] or "" for v in results["variants"]] + [
        lost["ran_on"] for v in results["variants"] for lost in v["lost"]
    ]
    return {int(pid) for text in texts for pid in re.findall(r"engine pid (\d+)", text)}


def _gone(pids: set[int], within_s: float = 30.0) -> set[int]:
    """Those of `pids` still running after `within_s` (none, when every engine was stopped)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = set()
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def test_ray_runs_the_experiment_on_both_nodes_with_the_schema_and_ranking_of_local(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    exp = _experiment(tmp_path)
    env = ray_cluster.env()
    on = ["--ray-address", ray_cluster.address]
    ray = subprocess.run(_tune(exp, tmp_path / "ray", *on), env=env, capture_output=True, text=True, timeout=300)
    assert ray.returncode == 0, ray.stdout + ray.stderr[-3000:]
    local = subprocess.run(
        _tune(exp, tmp_path / "local", "--executor", "local"), env=env, capture_output=True, text=True, timeout=300
    )
    assert local.returncode == 0, local.stdout + local.stderr[-3000:]
    on_ray = json.loads((tmp_path / "ray" / "results.json").read_text())
    here = json.loads((tmp_path / "local" / "results.json").read_text())
    for doc in (on_ray, here):
        doc["experiment"].pop("executor")
    assert json_schema(on_ray) == json_schema(here)
    assert all(v["status"] == "done" and v["rank"] is not None for v in on_ray["variants"])
    assert {v["name"] for v in on_ray["variants"]} == {v["name"] for v in here["variants"]}
    nodes = {re.search(r"ray node (127\.0\.0\.\d)", v["ran_on"]).group(1) for v in on_ray["variants"]}  # type: ignore[union-attr]
    assert nodes == {n.address for n in ray_cluster.nodes}, "both slots were used"
    assert all(v["ran_on"].startswith("local; engine pid") for v in here["variants"])
    logs = tmp_path / "ray" / "logs"
    assert len(list(logs.glob("*/llamacpp-*.log"))) == 4, "every engine log came back from its node"
    assert not _gone(_engine_pids(on_ray) | _engine_pids(here))


def test_resume_after_the_driver_is_killed_repeats_no_finished_run(ray_cluster: RayCluster, tmp_path: Path) -> None:
    exp, out = _experiment(tmp_path, tokens=512), tmp_path / "out"
    db = out / "servetune.db"
    driver = subprocess.Popen(
        _tune(exp, out, "--ray-address", ray_cluster.address),
        env=ray_cluster.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while len(_runs(db)) < 3 and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)  # no handler runs: Ray alone stops the tasks of a driver that died
    driver.wait(timeout=30)
    before = _runs(db)
    assert 3 <= len(before) < 16, len(before)
    running = {int(p) for _, _, where in _variants(db) for p in re.findall(r"engine pid (\d+)", where or "")}
    assert not _gone(running), "the engines of the killed driver's tasks are stopped"

    again = subprocess.run(
        _tune(exp, out, "--ray-address", ray_cluster.address, "--resume"),
        env=ray_cluster.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    after = _runs(db)
    assert len(after) == 16, "4 variants × 2 probes × 2 repeats"
    assert {k: after[k] for k in before} == before, "finished runs are kept as they were, not measured again"
    results = json.loads((out / "results.json").read_text())
    assert all(v["status"] == "done" for v in results["variants"])
    assert not _gone(_engine_pids(results))


def test_a_lost_node_fails_its_run_with_the_cause_and_it_is_retried_on_the_other(tmp_path: Path) -> None:
    """A cluster of its own: the test kills its worker node."""
    exp, out = _experiment(tmp_path, tokens=2048, changes="      four-slots: {parallel: 4}\n"), tmp_path / "out"
    db = out / "servetune.db"
    with RayCluster(workers=1) as cluster:
        worker = cluster.nodes[1]
        driver = subprocess.Popen(
            _tune(exp, out, "--ray-address", cluster.address),
            env=cluster.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 180
        victim = None
        while victim is None and time.monotonic() < deadline and driver.poll() is None:
            for name, status, where in _variants(db):
                if status == "running" and f"ray node {worker.address}" in (where or "") and len(_runs(db)) >= 1:
                    victim = name
            time.sleep(0.05)
        assert victim is not None, "a variant ran on the worker node"
        before = _runs(db)
        worker.kill()  # the node is lost mid-trial
        output = driver.communicate(timeout=300)[0]
        assert driver.returncode == 0, output[-4000:]
    assert not cluster.left([]), "every process of the cluster is gone"
    results = json.loads((out / "results.json").read_text())
    by_name = {v["name"]: v for v in results["variants"]}
    lost = by_name[victim]["lost"]
    assert len(lost) == 1 and lost[0]["failure"]["klass"] == "node_lost", lost
    assert worker.address in lost[0]["ran_on"] and worker.address in lost[0]["failure"]["excerpt"]
    assert lost[0]["failure"]["during"] != "launch", "it was lost mid-trial"
    assert by_name[victim]["status"] == "done" and f"ray node {cluster.nodes[0].address}" in by_name[victim]["ran_on"]
    assert f"LOST {victim}" in output and "node_lost" in output
    assert all(v["status"] == "done" for v in results["variants"])
    after = _runs(db)
    assert len(after) == 8 and {k: after[k] for k in before} == before, "the runs before the loss are kept"
    assert not _gone(_engine_pids(results)), "no engine is left on any node"
