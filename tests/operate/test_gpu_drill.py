"""The GPU drill's own logic (benchmarks/operate/gpu_drill.py), which runs once on a device with no second try:
it reads the share the switch plan's fix names, starts no phase before bench's load flows, and none after blue
failed to start. No engine runs here (the drill's CPU rehearsal in benchmarks/operate/data/ ran it end to end)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from benchmarks.operate.gpu_drill import Drill, _share, render

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.launch import RunningEngine
from servetune.engines.vllm import VllmAdapter
from servetune.hardware.catalog import get_gpu
from servetune.operate.capacity import Device, Footprint, SwitchPlan, decide_switch, held, need
from servetune.operate.fallback import set_flag
from servetune.operate.starts import StartEstimate

H200 = get_gpu("H200")
V = "0.24.0"
"""The device's vLLM: the drill names the installed one in its configs."""
FLAGS: dict[str, Any] = {"max-model-len": 8192, "load-format": "dummy"}
"""The drill's default flags; its model is qwen2-7b's config (src/servetune/model/configs)."""


def _drill(tmp_path: Path, **more: object) -> Drill:
    args = {"out": tmp_path, "deadline": 0.0, "settle_s": 0.0, "engine": "vllm", "serve_args": "--gpu H200"}
    return Drill(argparse.Namespace(**{**args, **more}))


def test_the_share_is_read_from_the_fix_the_switch_plan_writes() -> None:
    """Green at vLLM's default utilisation beside blue at 0.45 on the H200 is refused, and the drill reads the
    share that fits from the plan's own fix (a reworded fix would make the drill switch to the refused green)."""
    device = Device(kind="gpu", name="1x H200", gpu=H200, total_bytes=H200.memory_bytes, source="test")
    blue_cfg = EngineConfig(engine="vllm", model="qwen2-7b", flags={**FLAGS, "gpu-memory-utilization": 0.45}, version=V)
    blue = held(
        RunningEngine(blue_cfg, VllmAdapter(), None, "http://127.0.0.1:9", EngineFacts(engine="vllm"), None, None),
        device,
        "blue",
    )
    green_cfg = EngineConfig(engine="vllm", model="qwen2-7b", flags=dict(FLAGS), version=V)

    def plan(cfg: EngineConfig) -> SwitchPlan:
        green = need(cfg, device, "green")
        assert isinstance(green, Footprint)
        return decide_switch(
            device,
            blue,
            [],
            green,
            StartEstimate(seconds=None, expect="cold", basis="test"),
            drain_s=20.0,
            stop_grace_s=10.0,
            startup_timeout_s=420.0,
            max_unavailable_s=0.0,
            green_at=lambda u: need(set_flag(cfg, "gpu-memory-utilization", u), device, "green"),
        )

    refused = plan(green_cfg)
    share = _share(refused.fixes)
    assert refused.decision == "refuse" and share is not None and 0.4 < share < 0.55, refused.fixes
    assert plan(set_flag(green_cfg, "gpu-memory-utilization", share)).decision == "side_by_side"


def test_no_phase_starts_before_bench_answers_its_first_request(tmp_path: Path) -> None:
    """bench takes seconds to start (30 s on a loaded CPU): the rehearsal's switch began before bench sent
    anything, so "before switch" had no requests. The drill waits for bench's first record, and gives up when
    bench exits without one."""
    drill = _drill(tmp_path)
    records = tmp_path / "records.jsonl"
    drill.bench = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        threading.Timer(1.0, lambda: records.write_text('{"index": 0}\n')).start()
        t0 = time.monotonic()
        assert drill.load_flowing(records, timeout_s=20)
        assert time.monotonic() - t0 >= 0.9
    finally:
        drill.bench.kill()
        drill.bench.wait()
    records.unlink()
    drill.bench = subprocess.Popen([sys.executable, "-c", "pass"])
    drill.bench.wait()
    assert not drill.load_flowing(records, timeout_s=20)


def test_no_phase_runs_when_blue_never_became_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A blue that never became ready left serve running, and the drill went on to switch, kill and drain an
    engine that was not there: it finishes with the failure instead."""
    drill = _drill(tmp_path, flags="{}", blue_util=0.45, fallback_flags="{}", model_dir="m", served_name="m")
    ran: list[str] = []

    def start(blue: Path, fallback: Path) -> None:
        drill.serve = subprocess.Popen([sys.executable, "-c", "pass"])
        drill.serve.wait()
        drill.summary["failed"] = "blue never became ready"

    monkeypatch.setattr(drill, "start", start)
    for phase in ("switch", "kill", "fallback", "drain"):
        monkeypatch.setattr(drill, phase, lambda p=phase: ran.append(p))
    monkeypatch.setattr(drill, "kv_capacity", lambda: [])
    drill.run()
    assert ran == []
    assert "blue never became ready" in (tmp_path / "summary.md").read_text()


def test_a_failed_switch_is_said_to_have_failed_and_why() -> None:
    """A green that timed out starting (the rehearsal's, on a loaded CPU) read "switch exit 2, None in None s"."""
    check = {"exit": 0, "decision": "side_by_side"}
    failed = {"event": "switch_failed", "reason": "startup_timeout: Not ready after 600 s."}
    switch = {"check_default": check, "check_sized": check, "share_from_the_plan": None, "exit": 2}
    text = render({"phases": {"switch": {**switch, "result": failed, "green_kv_tokens_planned": 1}}})
    assert "switch exit 2, **failed**: startup_timeout: Not ready after 600 s." in text and "None in None" not in text
    done = {"event": "switch_done", "decision": "side_by_side", "total_s": 3.5, "start_s": 2.0, "drain_s": 0.9}
    text = render({"phases": {"switch": {**switch, "exit": 0, "result": done, "green_kv_tokens_planned": 1}}})
    assert "side_by_side in 3.5 s (green start 2.0 s" in text and "old nginx workers gone after 0.9 s" in text


def test_windows_report_vllms_ttft_and_when_a_killed_engines_memory_came_back(tmp_path: Path) -> None:
    """The H200 run's windows first showed the time to first *content* chunk as "TTFT" (10–120 ms later than the
    first output chunk with a dummy model): each window now shows vLLM's TTFT, through the record's own
    `ttft_ns` and `Stat`'s percentiles, as bench prints it; and NVML's samples say when a kill's memory was back."""
    from servetune.metrics.record import RequestRecord

    drill = _drill(tmp_path)
    drill.summary["clock"] = {"wall0": 1000.0, "monotonic0": 0.0}  # wall = monotonic + 1000
    drill.summary["phases"] = {"kill": {"window": [1010.0, 1020.0]}}
    (tmp_path / "bench").mkdir()
    recs = [
        # sent at 1001 s: first chunk 30 ms later, first content 50 ms later
        RequestRecord(
            index=0,
            sent_ns=1_000_000_000,
            chunk_ns=[1_030_000_000, 1_050_000_000],
            first_content_ns=1_050_000_000,
            done_ns=1_100_000_000,
        ),
        RequestRecord(index=1, sent_ns=12_000_000_000, done_ns=12_001_000_000, error_class="http_5xx", http_status=503),
    ]
    (tmp_path / "bench" / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    (tmp_path / "nvml.csv").write_text(
        "t,gpu,used_bytes,total_bytes\n1009.5,0,80000,100000\n1010.4,0,79000,100000\n1010.9,0,600,100000\n"
        "1011.4,0,600,100000\n1015.0,0,40000,100000\n"
    )
    load = drill.load_by_phase()
    assert load["before kill"]["ttft_p50_ms"] == 30.0
    assert load["during kill"]["failed_by"] == {"http_5xx 503": 1}
    assert drill.memory_freed() == {"kill": 0.9}
