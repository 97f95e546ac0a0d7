"""The `local-gpus` executor on a CPU machine with fake GPU ids: its slot logic (which GPUs a launch of a given world
size gets), its schema, and real llama.cpp launch groups side by side in slot processes — including a slot process
killed mid-trial (recorded failed with its cause, retried on the other GPU, the experiment finishing)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from servetune.errors import ServetuneError
from servetune.tune.execution.local_gpus import LocalGpusExecutor, host_gpus, pick
from servetune.tune.loop import fingerprint, run_experiment
from servetune.tune.schema.experiment import ExecutorSpec
from servetune.tune.schema.loader import parse_experiment, with_executor
from servetune.tune.schema.variants import base_config

REPO = Path(__file__).resolve().parents[2]

TP = """
name: tp
engine: {{engine: vllm, model: /models/m, flags: {{tensor-parallel-size: {tp}}}}}
hardware: {{gpu: H200}}
executor: {{kind: local-gpus, gpus: [0, 1, 2, 3]}}
variants: {{matrix: {{changes: {{a: {{max-num-seqs: 8}}}}}}}}
"""


def test_a_launch_gets_an_aligned_block_when_one_is_free() -> None:
    gpus = ("0", "1", "2", "3")
    assert pick(gpus, set(gpus), 2) == ("0", "1")
    assert pick(gpus, {"2", "3"}, 2) == ("2", "3")
    assert pick(gpus, {"1", "2"}, 2) == ("1", "2"), "no aligned pair free: any two"
    assert pick(gpus, set(gpus), 4) == gpus and pick(gpus, {"0", "1", "2"}, 4) is None
    assert pick(gpus, set(gpus), 1, avoid={"0"}) == ("1",), "not where the last launch was lost"
    assert pick(gpus, {"0"}, 1, avoid={"0"}) is None, "it waits for another GPU"
    assert pick(("0",), {"0"}, 1, avoid={"0"}) == ("0",), "unless there is no other"
    assert pick(gpus, set(gpus), 2, avoid={"0", "1"}) == ("2", "3")
    assert pick(gpus, set(gpus), 4, avoid={"0"}) == gpus


def test_slots_are_the_world_size_of_each_launch() -> None:
    exp = parse_experiment(TP.format(tp=2))
    executor = LocalGpusExecutor(exp, exp.executor.gpus)
    assert exp.hardware.slot_size({"tensor-parallel-size": 2}) == 2
    assert exp.hardware.slot_size({}) == 1 and parse_experiment(TP.format(tp=1)).hardware.slot_size({}) == 1
    assert executor.capacity(2) == 2 and executor.capacity(1) == 4 and executor.capacity(8) == 0
    assert base_config(exp).flags["tensor-parallel-size"] == 2
    wide = parse_experiment(TP.format(tp=8))
    with pytest.raises(ServetuneError, match=r"needs 8 GPU\(s\).*local-gpus has 4: 0,1,2,3"):
        LocalGpusExecutor(wide, wide.executor.gpus).submit([_variant(wide)])


def test_check_and_the_run_set_aside_a_launch_wider_than_the_gpus_given(tmp_path: Path) -> None:
    """The plan both `tune --check` and the run use marks a TP8 change infeasible on 4 given GPUs, with the
    reason; the run measures the rest (no launch here: feasibility is stubbed, the launcher refuses)."""
    from servetune.tune.search.plan import plan_experiment
    from servetune.tune.search.sources import Verdict

    text = TP.format(tp=2).replace("changes: {a: {max-num-seqs: 8}}", "changes: {wide: {tensor-parallel-size: 8}}")
    exp = parse_experiment(text)
    plan = plan_experiment(exp, feasibility=lambda _: Verdict(), predictor=None)
    fates = {p.variant.name: p for stage in plan.stages for p in stage.batch.planned}
    assert fates["wide"].action == "infeasible" and fates["baseline"].action == "launch", fates
    assert "needs 8 GPU(s) for one launch, but executor local-gpus has 4: 0,1,2,3" in fates["wide"].reasons[0]
    assert "needs 8 GPU(s)" in "\n".join(plan.lines())


def _variant(exp: object) -> object:
    from servetune.tune.search.sources import FixedSource, source_for

    assert not isinstance(exp, str)
    source = source_for(exp.variants.as_stages()[0], base_config(exp), exp.client, "max", None)  # type: ignore[attr-defined]
    assert isinstance(source, FixedSource)
    return source.ask()[0]


def test_gpu_ids_come_from_the_option_then_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    assert host_gpus(("3", "5")) == ("3", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert host_gpus(None) == ("2", "3")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    if not __import__("servetune.hardware.nvml", fromlist=["read_devices"]).read_devices():
        with pytest.raises(ServetuneError, match="found no GPU"):
            host_gpus(None)


def test_executor_keys_and_options() -> None:
    assert ExecutorSpec.model_validate("ray").kind == "ray"
    assert ExecutorSpec.model_validate({"kind": "local-gpus", "gpus": [0, 1]}).gpus == ("0", "1")
    for bad in (
        {"kind": "local", "gpus": [0]},
        {"kind": "local-gpus", "gpus": []},
        {"kind": "local-gpus", "address": "x"},
    ):
        with pytest.raises(ValueError):
            ExecutorSpec.model_validate(bad)
    exp = parse_experiment(TP.format(tp=1))
    moved = with_executor(exp, kind="ray", address="10.0.0.1:6379", resource="fake_gpu")
    assert moved.executor == ExecutorSpec(kind="ray", address="10.0.0.1:6379", resource="fake_gpu")
    assert with_executor(exp, gpus="4,5").executor.gpus == ("4", "5"), "the file's kind, the option's GPUs"
    assert fingerprint(moved) == fingerprint(exp), "where it runs is not the experiment: a resume may move it"
    with pytest.raises(ServetuneError, match="gpus is for executor local-gpus"):
        with_executor(exp, kind="local", gpus="0")


@pytest.mark.parametrize("address", ["garbage", "", "h:0", "h:99999", "10.0.0.1", "a b:1", "http://h:6379"])
def test_a_ray_address_ray_cannot_join_is_refused_by_the_check(address: str) -> None:
    """`executor: {kind: ray, address: garbage}` passed `tune --check`; Ray refused it only once the run started."""
    with pytest.raises(ValueError, match="address must be a Ray cluster's HOST:PORT"):
        ExecutorSpec.model_validate({"kind": "ray", "address": address})
    for good in ("auto", "10.0.0.1:6379", "head-node:6379", "ray://10.0.0.1:10001", "[::1]:6379"):
        assert ExecutorSpec.model_validate({"kind": "ray", "address": good}).address == good


def test_gpu_ids_that_cuda_visible_devices_cannot_take_are_refused(tmp_path: Path) -> None:
    exp = parse_experiment(TP.format(tp=1))
    assert with_executor(exp, kind="local-gpus", gpus="GPU-5e1a-77,MIG-9f/1/0").executor.gpus == (
        "GPU-5e1a-77",
        "MIG-9f/1/0",
    )
    for bad in ("x", "0,x", "-1", "0.5"):
        with pytest.raises(ServetuneError, match=r"GPU indices \(0, 1, \.\.\.\) or UUIDs") as err:
            with_executor(exp, kind="local-gpus", gpus=bad)
        assert "--gpus" in err.value.fix
    path = tmp_path / "exp.yaml"
    path.write_text(TP.format(tp=1))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "servetune",
            "tune",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--executor",
            "local-gpus",
            "--gpus",
            "x",
            "--check",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "'x'" in done.stderr and "Traceback" not in done.stderr


def test_a_launcher_goes_with_the_local_executor_only(tmp_path: Path) -> None:
    exp = parse_experiment(TP.format(tp=1))
    with pytest.raises(ValueError, match="local executor"):
        run_experiment(exp, tmp_path, launcher=lambda *a: None)  # type: ignore[arg-type, return-value]


LLAMA = """
name: slots
engine:
  engine: llamacpp
  model: tiny
  flags: {ctx-size: 6144, parallel: 2, threads: 1}  # 1, 2, 3 and 4 slots of whole 256-token blocks
client: {endpoint: completions, tokenizer: tiny}
suite:
  repeats: 2
  warmup_requests: 1
  probes:
    short_latency: {max_tokens: 8}
    decode_speed: {output_tokens: OUTPUT}
objective: decode_tok_s
executor: {kind: local-gpus, gpus: [7, 9]}
variants:
  matrix:
    baseline: two-slots
    changes:
      four-slots: {parallel: 4}
CHANGES
"""


@pytest.fixture
def _cache(monkeypatch: pytest.MonkeyPatch, tiny_model: object) -> None:
    monkeypatch.setenv("SERVETUNE_CACHE", os.environ.get("SERVETUNE_CACHE", str(REPO / ".servetune-cache")))


def _children() -> set[psutil.Process]:
    return set(psutil.Process().children(recursive=True))


def _no_child_left(before: set[psutil.Process]) -> None:
    """None of the processes this test started is left (the session's engine fixtures are not the test's)."""
    deadline = time.monotonic() + 10
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _children() - before


@pytest.mark.engine
@pytest.mark.usefixtures("_cache")
def test_launch_groups_run_side_by_side_each_on_its_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Side by side is the executor's doing: how many slots it holds open at once, counted from its own opens and
    releases (in the driver's order). The order of the slots' progress lines would depend on how the machine
    schedules two processes: on a loaded one, a slot can finish before the other has printed a line."""
    open_slots, most = 0, 0

    def opened(self: LocalGpusExecutor, *args: Any) -> Any:
        nonlocal open_slots, most
        open_slots += 1
        most = max(most, open_slots)
        return real_open(self, *args)

    def released(self: LocalGpusExecutor, claim: tuple[str, ...]) -> None:
        nonlocal open_slots
        open_slots -= 1
        real_release(self, claim)

    real_open, real_release = LocalGpusExecutor.open, LocalGpusExecutor.release
    monkeypatch.setattr(LocalGpusExecutor, "open", opened)
    monkeypatch.setattr(LocalGpusExecutor, "release", released)
    changes = "      one-slot: {parallel: 1}\n      three-slots: {parallel: 3}"
    exp = parse_experiment(LLAMA.replace("OUTPUT", "64").replace("CHANGES", changes))
    before = _children()
    outcome = run_experiment(exp, tmp_path)
    assert all(r.status == "done" and len(r.runs) == 4 for r in outcome.records)
    devices = [r.ran_on.split("CUDA_VISIBLE_DEVICES=")[1].split(";")[0] for r in outcome.records if r.ran_on]
    assert sorted(devices) == ["7", "7", "9", "9"], "each GPU held one launch at a time, both were used"
    assert most == 2 and open_slots == 0, "two slots were open at once, no more, and every slot was given back"
    assert outcome.launches == 4 and len(list((tmp_path / "logs").glob("*/llamacpp-*.log"))) == 4
    _no_child_left(before)


def _stored(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return int(con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


@pytest.mark.engine
@pytest.mark.usefixtures("_cache")
def test_a_slot_killed_mid_trial_fails_its_run_and_it_is_retried_on_the_other_gpu(tmp_path: Path) -> None:
    exp = parse_experiment(LLAMA.replace("OUTPUT", "2048").replace("CHANGES", ""))
    before = _children()
    killed: list[int] = []

    def kill_a_slot() -> None:  # once the slots have stored 3 runs: mid-way through a decode_speed
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _stored(tmp_path / "servetune.db") < 3:
            time.sleep(0.05)
        slots = [p for p in psutil.Process().children() if "servetune.tune.execution.slot" in " ".join(p.cmdline())]
        os.kill(slots[0].pid, signal.SIGKILL)
        killed.append(slots[0].pid)

    killer = threading.Thread(target=kill_a_slot)
    killer.start()
    lines: list[str] = []
    outcome = run_experiment(exp, tmp_path, emit=lines.append)
    killer.join()
    assert killed, "a slot process was killed"
    lost = [r for r in outcome.records if r.lost]
    assert len(lost) == 1 and all(r.status == "done" and len(r.runs) == 4 for r in outcome.records)
    attempt = lost[0].lost[0]
    assert attempt.failure.klass == "task_lost" and f"pid {killed[0]}" in attempt.failure.excerpt
    assert "killed by signal 9" in attempt.failure.excerpt and attempt.failure.during.startswith(("short", "decode"))
    first_gpu = attempt.ran_on.split("CUDA_VISIBLE_DEVICES=")[1].split(";")[0]
    retry_gpu = (lost[0].ran_on or "").split("CUDA_VISIBLE_DEVICES=")[1].split(";")[0]
    assert first_gpu != retry_gpu, "retried on the other GPU"
    assert any(line.startswith(f"LOST {lost[0].variant.name}") for line in lines)
    engine = int(attempt.ran_on.rsplit("engine pid ", 1)[1])
    assert not psutil.pid_exists(engine) or psutil.Process(engine).status() == psutil.STATUS_ZOMBIE
    _no_child_left(before)
