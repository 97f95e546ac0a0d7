"""The device campaign's one background job: every vLLM startup of plan.json in order, its load points, stops.

    setsid nohup python3 driver.py --plan plan.json --out /root/dc --deadline-file /root/dc/deadline &

Runs on the device (python3 with vLLM's dependencies; servetune's source on PYTHONPATH) and, for a rehearsal,
here with vLLM CPU and the tiny model (`--vllm`, `--scale`, `--no-gpu`). For each startup: launch `vllm serve`
in its own process group (pgid in /root/vllm.pid or --pid-file), wait for /health, snapshot nvidia-smi, run the
startup's points with servetune's own client (`run_load`), stop the group (SIGTERM, then SIGKILL), wait until the
GPU memory is free again. Deadline-aware: before each item (a startup or a point) it checks that the item and
every later item of a more important priority still fit before the deadline (re-read from --deadline-file before
each item, so a poll can move it), else the item is skipped and recorded as such.

Writes under --out (everything a poll tars):
    manifest.json                    plan, environment, every event with its wall-clock times, skips, failures
    driver.log                       this job's log
    <startup>/vllm.log               the server's whole log (startup lines, periodic stats, errors)
    <startup>/startup.json           argv, env, launch/ready/stop times, ready_s, outcome, nvidia-smi after ready
    <startup>/<point>.jsonl          one servetune RequestRecord per request (phase: warmup | measure)
    <startup>/<point>.summary.json   vLLM-definition figures of the measured requests + servetune's own summary
    <startup>/<point>.metrics.before.prom / .after.prom   /metrics right before / after the point
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "sim_fidelity"))

from points import POINTS, Point, build  # noqa: E402

LOG_CONFIG = {
    # vLLM's default format; the worker's memory-profiling breakdown (logged at DEBUG) is kept too
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "vllm": {
            "class": "vllm.logging_utils.NewLineFormatter",
            "datefmt": "%m-%d %H:%M:%S",
            "format": "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s",
        }
    },
    "handlers": {"vllm": {"class": "logging.StreamHandler", "formatter": "vllm", "level": "DEBUG"}},
    "loggers": {
        "vllm": {"handlers": ["vllm"], "level": "INFO", "propagate": False},
        "vllm.v1.worker.gpu_worker": {"level": "DEBUG"},
    },
}


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.plan = json.loads(Path(args.plan).read_text())
        # a plan may define its own points (benchmarks/ttft_parts, tuning_table): they replace points.py's by name
        POINTS.update({name: Point.of(d) for name, d in self.plan.get("points", {}).items()})
        only = set(args.only.split(",")) if args.only else None
        self.startups = [s for s in self.plan["startups"] if only is None or s["id"] in only]
        self.base = f"http://127.0.0.1:{args.port}"
        self.start_ratios: dict[str, list[float]] = {"cold": [], "later": []}
        self.point_factor: dict[str, float] = {}
        self.manifest: dict = {
            "plan": self.plan,
            "args": vars(args),
            "started": time.time(),
            "host": os.uname().nodename,
            "events": [],
            "startups": {},
        }
        self.log_file = open(self.out / "driver.log", "a", buffering=1)  # noqa: SIM115

    # --- bookkeeping ------------------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        self.log_file.write(line + "\n")

    def event(self, kind: str, **kw) -> None:
        self.manifest["events"].append({"t": round(time.time(), 3), "kind": kind, **kw})
        self.save()

    def save(self) -> None:
        tmp = self.out / "manifest.json.tmp"
        tmp.write_text(json.dumps(self.manifest, indent=1))
        tmp.replace(self.out / "manifest.json")

    def now(self) -> float:
        return time.time()

    def deadline(self) -> float:
        try:
            return float(Path(self.a.deadline_file).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return self.now() + 10**9

    # --- costs ------------------------------------------------------------------------------------------
    def items(self) -> list[tuple[int, int | None]]:
        out: list[tuple[int, int | None]] = []
        for i, s in enumerate(self.startups):
            out.append((i, None))
            out += [(i, j) for j in range(len(s["points"]))]
        return out

    def cost(self, item: tuple[int, int | None]) -> float:
        s = self.startups[item[0]]
        if item[1] is None:
            return s["est_start_s"] * self.start_factor(s) + self.a.stop_s
        p = s["points"][item[1]]
        return p["est_s"] * self.point_factor.get(s["model"], 1.0) * self.a.scale_est

    def start_factor(self, s: dict) -> float:
        """Measured / estimated start time so far, for cold starts and later starts apart."""
        own = self.start_ratios["cold" if s["cold"] else "later"]
        other = self.start_ratios["later" if s["cold"] else "cold"]
        ratios = own or other
        return min(2.0, max(0.5, sum(ratios) / len(ratios))) if ratios else 1.0

    def priority(self, item: tuple[int, int | None]) -> int:
        s = self.startups[item[0]]
        return s["priority"] if item[1] is None else s["points"][item[1]]["priority"]

    def fits(self, item: tuple[int, int | None], skipped: set[int]) -> tuple[bool, str]:
        items = self.items()
        k = items.index(item)
        prio = self.priority(item)
        need = self.cost(item)
        own: set[tuple[int, int | None]] = set()
        if item[1] is None:  # a startup needs its own points of its priority too
            own = {it for it in items[k + 1 :] if it[0] == item[0] and self.priority(it) <= prio}
            need += sum(self.cost(it) for it in own)
        reserve = sum(
            self.cost(it)
            for it in items[k + 1 :]
            if it not in own and it[0] not in skipped and self.priority(it) < prio
        )
        left = self.deadline() - self.now()
        ok = need + reserve <= left
        return ok, f"need {need:.0f} s + reserve {reserve:.0f} s vs {left:.0f} s left"

    # --- server -----------------------------------------------------------------------------------------
    def http(self, path: str, timeout: float = 5.0) -> str | None:
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
                return r.read().decode()
        except Exception:  # noqa: BLE001
            return None

    def gpu_used_mib(self) -> float | None:
        if self.a.no_gpu:
            return None
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout
            return float(out.split()[0])
        except Exception:  # noqa: BLE001
            return None

    def smi(self) -> str:
        if self.a.no_gpu:
            return ""
        try:
            return subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,memory.total,memory.used,memory.free,clocks.sm,clocks.max.sm,"
                    "power.draw,temperature.gpu",
                    "--format=csv",
                ],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout
        except Exception as err:  # noqa: BLE001
            return f"nvidia-smi failed: {err}"

    def launch(self, s: dict, sdir: Path) -> tuple[subprocess.Popen, dict]:
        argv = [
            *shlex.split(self.a.vllm),
            *(["--model", s["model_dir"]] if self.a.api_server else ["serve", s["model_dir"]]),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.a.port),
            "--served-model-name",
            "m",
            *(["--load-format", "dummy"] if not self.a.real_weights else []),
            *s["flags"],
            *shlex.split(self.a.extra_flags),
        ]
        env = dict(os.environ)
        env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            VLLM_USE_FLASHINFER_SAMPLER="0",
            VLLM_LOGGING_CONFIG_PATH=str(self.out / "vllm_logging.json"),
            PYTHONUNBUFFERED="1",
        )
        for kv in self.a.env:
            k, _, v = kv.partition("=")
            env[k] = v
        log = open(sdir / "vllm.log", "w")  # noqa: SIM115
        t0 = time.time()
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
        Path(self.a.pid_file).write_text(str(proc.pid))
        info = {
            "argv": argv,
            "env": {k: env[k] for k in sorted(env) if k.startswith(("VLLM", "TRITON", "HF_"))},
            "t_launch": t0,
            "pgid": proc.pid,
        }
        return proc, info

    def wait_ready(self, proc: subprocess.Popen, timeout: float, log: Path | None = None) -> str:
        """Returns ready (/health answers), kv (with `log`: vLLM printed its KV-cache lines), died or timeout."""
        t_end = time.time() + timeout
        while time.time() < t_end:
            if proc.poll() is not None:
                return "died"
            if log is not None:
                try:
                    text = log.read_text(errors="replace")
                except OSError:
                    text = ""
                if "Maximum concurrency for" in text:
                    time.sleep(1.0)  # the lines logged right after it
                    return "kv"
            elif self.http("/health", 2) is not None:
                return "ready"
            time.sleep(1)
        return "timeout"

    def stop(self, proc: subprocess.Popen, hard: bool = False) -> float:
        """SIGTERM to the server's process group (SIGKILL at once with `hard`: a server stopped mid-start)."""
        t0 = time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL if hard else signal.SIGTERM)
        try:
            proc.wait(timeout=self.a.grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        # children of the group (the engine core) may outlive the API server for a moment
        for _ in range(30):
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for _ in range(60):  # the GPU memory back before the next start (vLLM checks free memory)
            used = self.gpu_used_mib()
            if used is None or used < 2048:
                break
            time.sleep(1)
        Path(self.a.pid_file).unlink(missing_ok=True)
        return time.time() - t0

    # --- points -----------------------------------------------------------------------------------------
    async def run_point(self, s: dict, p: dict, sdir: Path, results: dict) -> dict:
        from fidelity_records import summarize as vllm_summarize

        from servetune.load.runner import run_load

        point = POINTS[p["name"]]
        rate = None
        if point.kind == "poisson" and point.rate_ref is None:
            rate = point.rate_factor  # a fixed rate (points.py)
        elif point.kind == "poisson":
            ref = results.get(point.rate_ref or "")
            if not ref or not ref.get("request_throughput"):
                return {"outcome": "skipped", "why": f"no measured {point.rate_ref} throughput"}
            rate = round(point.rate_factor * ref["request_throughput"], 3)
        workload, shape = build(point, rate, self.a.scale)
        before = self.http("/metrics", 10) or ""
        t0 = time.time()
        timeout = max(90.0, 5 * p["est_s"] * self.a.scale_est + 60)
        timeout = min(timeout, max(15.0, self.deadline() - self.now() + 10))
        try:
            result = await asyncio.wait_for(
                run_load(self.base, "m", workload, shape, tokenizer=self.a.tokenizer, extra_body={"temperature": 0.0}),
                timeout=timeout,
            )
        except Exception as err:  # noqa: BLE001
            return {"outcome": "error", "error": f"{type(err).__name__}: {err}", "wall_s": time.time() - t0}
        wall = time.time() - t0
        after = self.http("/metrics", 10) or ""
        (sdir / f"{p['name']}.metrics.before.prom").write_text(before)
        (sdir / f"{p['name']}.metrics.after.prom").write_text(after)
        with open(sdir / f"{p['name']}.jsonl", "w") as f:
            for r in result.records:
                f.write(r.model_dump_json() + "\n")
        recs = [json.loads(r.model_dump_json()) for r in result.records]
        summary = vllm_summarize(recs)
        summary.update(
            point=p["name"],
            startup=s["id"],
            kind=point.kind,
            sim_role=p["sim_role"],
            rate=rate,
            requests_sent=len(recs),
            measured=sum(1 for r in recs if r.get("phase") == "measure"),
            wall_s=round(wall, 3),
            t_start=t0,
            shape=json.loads(shape.model_dump_json()),
            workload=json.loads(workload.model_dump_json()),
            tokenizer=result.tokenizer,
            servetune_summary=json.loads(result.summary.model_dump_json()),
        )
        (sdir / f"{p['name']}.summary.json").write_text(json.dumps(summary, indent=1))
        return {
            "outcome": "ok",
            "wall_s": round(wall, 3),
            **{
                k: summary.get(k)
                for k in (
                    "completed",
                    "failed",
                    "ttft_ms_p50",
                    "tpot_ms_p50",
                    "output_throughput",
                    "request_throughput",
                )
            },
        }

    # --- the campaign -----------------------------------------------------------------------------------
    def run(self) -> None:
        (self.out / "vllm_logging.json").write_text(json.dumps(LOG_CONFIG, indent=1))
        self.event("begin", deadline=self.deadline(), startups=[s["id"] for s in self.startups])
        skipped: set[int] = set()
        done: set[int] = set()
        for i, s in enumerate(self.startups):
            rec: dict = {
                "id": s["id"],
                "model": s["model"],
                "flags": s["flags"],
                "cold": s["cold"],
                "est_start_s": round(s["est_start_s"] * self.start_factor(s), 1),
                "points": {},
            }
            self.manifest["startups"][s["id"]] = rec
            ok, why = self.fits((i, None), skipped)
            if not ok:
                rec["outcome"] = "skipped"
                rec["why"] = why
                skipped.add(i)
                self.log(f"{s['id']}: skipped ({why})")
                self.event("skip_startup", id=s["id"], why=why)
                continue
            sdir = self.out / s["id"]
            sdir.mkdir(exist_ok=True)
            used_before = self.gpu_used_mib()
            proc, info = self.launch(s, sdir)
            rec.update(info, gpu_used_mib_before=used_before)
            self.log(f"{s['id']}: launched {s['model']} {' '.join(s['flags'])} ({why})")
            self.event("launch", id=s["id"])
            left = self.deadline() - self.now() - 5
            timeout = max(60.0, min(max(2.5 * s["est_start_s"], 420.0), left))
            kv_only = s.get("stop_after") == "kv"
            outcome = self.wait_ready(proc, timeout, sdir / "vllm.log" if kv_only else None)
            t_ready = self.now()
            rec.update(outcome=outcome, t_ready=t_ready, ready_s=round(t_ready - info["t_launch"], 2))
            self.log(f"{s['id']}: {outcome} after {rec['ready_s']:.0f} s")
            self.event(outcome, id=s["id"], ready_s=rec["ready_s"])
            if outcome in ("ready", "kv"):
                self.start_ratios["cold" if s["cold"] else "later"].append(rec["ready_s"] / max(1.0, s["est_start_s"]))
            if outcome == "ready":
                rec["nvidia_smi_ready"] = self.smi()
                rec["version"] = self.http("/version")
                results: dict = {}
                for j, p in enumerate(s["points"]):
                    ok, why = self.fits((i, j), skipped)
                    if not ok:
                        rec["points"][p["name"]] = {"outcome": "skipped", "why": why}
                        self.log(f"{s['id']}/{p['name']}: skipped ({why})")
                        continue
                    if proc is not None and proc.poll() is not None:
                        rec["points"][p["name"]] = {"outcome": "skipped", "why": "server died"}
                        continue
                    self.log(f"{s['id']}/{p['name']}: start ({why})")
                    res = asyncio.run(self.run_point(s, p, sdir, results))
                    res["est_s"] = p["est_s"]
                    rec["points"][p["name"]] = res
                    if res["outcome"] == "ok":
                        summ = json.loads((sdir / f"{p['name']}.summary.json").read_text())
                        results[p["name"]] = summ
                        if p["name"] != "warmup":
                            r = res["wall_s"] / max(1.0, p["est_s"] * self.a.scale_est)
                            f0 = self.point_factor.get(s["model"])
                            self.point_factor[s["model"]] = r if f0 is None else 0.5 * (f0 + r)
                    self.log(f"{s['id']}/{p['name']}: {json.dumps(res)}")
                    self.event("point", id=s["id"], point=p["name"], outcome=res["outcome"])
                rec["nvidia_smi_end"] = self.smi()
            rec["t_stop_begin"] = self.now()
            rec["stop_s"] = round(self.stop(proc, hard=outcome != "ready"), 2)
            rec["t_stopped"] = self.now()
            rec["engine_s"] = round(rec["t_stopped"] - info["t_launch"], 2)
            done.add(i)
            self.log(f"{s['id']}: stopped in {rec['stop_s']:.0f} s; engine time {rec['engine_s']:.0f} s")
            self.event("stopped", id=s["id"], engine_s=rec["engine_s"])
        self.manifest["ended"] = self.now()
        self.event("end")
        (self.out / "DONE").write_text("done\n")


class DryRun(Driver):
    """The same decisions on a virtual clock: startups take est x --dry-start-factor, points est x
    --dry-point-factor (what would run, what would be skipped, for a given deadline)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.clock = time.time()
        self.t0 = self.clock

    def now(self) -> float:
        return self.clock

    def deadline(self) -> float:
        return self.t0 + self.a.dry_budget_s

    def launch(self, s: dict, sdir: Path):
        self._s = s
        return None, {"t_launch": self.clock, "pgid": 0}

    def wait_ready(self, proc, timeout: float, log=None) -> str:
        self.clock += min(timeout, self._s["est_start_s"] * self.a.dry_start_factor)
        return "kv" if log is not None else "ready"

    async def run_point(self, s: dict, p: dict, sdir: Path, results: dict) -> dict:
        wall = p["est_s"] * self.a.dry_point_factor
        self.clock += wall
        (sdir / f"{p['name']}.summary.json").write_text("{}")
        return {"outcome": "ok", "wall_s": wall}

    def stop(self, proc, hard: bool = False) -> float:
        self.clock += self.a.stop_s
        return self.a.stop_s

    def smi(self) -> str:
        return ""

    def http(self, path: str, timeout: float = 5.0) -> str | None:
        return None

    def gpu_used_mib(self) -> float | None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-file", default="/root/dc/deadline")
    ap.add_argument("--vllm", default="python3 -m vllm.entrypoints.cli.main")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json for exact prompt lengths")
    ap.add_argument("--pid-file", default="/root/vllm.pid")
    ap.add_argument("--only", default="", help="comma-separated startup ids")
    ap.add_argument("--scale", type=float, default=1.0, help="request counts x this (rehearsal)")
    ap.add_argument("--scale-est", type=float, default=1.0, help="point time estimates x this")
    ap.add_argument("--stop-s", type=float, default=15.0, help="expected seconds to stop a server")
    ap.add_argument("--grace-s", type=float, default=20.0)
    ap.add_argument("--extra-flags", default="", help="appended to every vllm serve (rehearsal)")
    ap.add_argument("--env", action="append", default=[], help="K=V for the server's environment")
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument(
        "--api-server", action="store_true", help="--vllm is `python -m vllm.entrypoints.openai.api_server` (CPU build)"
    )
    ap.add_argument("--real-weights", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="decisions only, on a virtual clock")
    ap.add_argument("--dry-budget-s", type=float, default=1500.0)
    ap.add_argument("--dry-start-factor", type=float, default=1.0)
    ap.add_argument("--dry-point-factor", type=float, default=1.0)
    args = ap.parse_args()
    (DryRun if args.dry_run else Driver)(args).run()


if __name__ == "__main__":
    main()
