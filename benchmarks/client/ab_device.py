#!/usr/bin/env python3
"""Where servetune's cost per token above the floor goes: variants of one client side by side, alternated.

Server (`servetune mock-server`, one token per 5 ms) on CPU 0, servetune on CPU 1, c256; each variant runs a 5 s
and a 20 s run and its cost is Δ(client CPU) / Δ(tokens), as the cost section of `run.py` takes it:
- base: servetune as it is, 128-token answers;
- nomon: the event-loop monitor switched off (a copy of the source with `LoopMonitor.run` returning at once):
  does sampling the loop's lag and CPU time every 10 ms cost anything?
- out32: 32-token answers: with base, it splits the cost into a part per request and a part per token
  (cost per token = per request / tokens + per token).
Usage (a machine with two free CPUs, from the repository root): `python -m benchmarks.client.ab_device [ROUNDS]`
→ `AB_OUT` (default `ab.json`). Results of the 16-core device: `many-cores/ab/`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.client import run as bench

HERE = Path(__file__).resolve().parent

SRC = HERE.parents[1] / "src"


def without_monitor() -> Path:
    """A copy of the source tree whose loop monitor returns at once (the run's verdict then has no samples)."""
    copy = Path(tempfile.mkdtemp(prefix="ab-nomon-")) / "src"
    shutil.copytree(SRC, copy)
    monitor = copy / "servetune/load/monitor.py"
    text = monitor.read_text()
    old = "    async def run(self) -> None:\n"  # the loop's sampler: returning at once leaves no samples
    if text.count(old) != 1:
        raise SystemExit("monitor.py changed: update ab_device.py")
    monitor.write_text(text.replace(old, old + "        return\n"))
    return copy


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    base = os.environ.get("PYTHONPATH", "")
    nomon = f"{without_monitor()}:{base}" if base else str(without_monitor())
    variants = {"base": (base, 128), "nomon": (nomon, 128), "out32": (base, 32)}
    work = Path(tempfile.mkdtemp(prefix="ab-"))
    out: dict[str, list[dict]] = {}
    with bench.Mock(18701, 50.0, 5.0, cheap=True) as mock:
        for rnd in range(rounds):
            for name, (path, n_out) in variants.items():
                runs = {}
                for label, seconds in (("small", 5), ("big", 20)):
                    argv = bench.servetune_argv(
                        mock.url, 256, work, f"{name}-{label}", "--duration", str(seconds), jsonl=False
                    )
                    argv[argv.index("--output-tokens") + 1] = str(n_out)
                    os.environ["PYTHONPATH"] = path
                    try:
                        runs[label] = bench.run_client(argv, mock, work, f"{name}-{label}", "1", timeout_s=200)
                    finally:
                        os.environ["PYTHONPATH"] = base
                got = bench.difference(runs["small"], runs["big"])
                if got is None:
                    raise SystemExit(f"{name}: the long run streamed no more tokens than the short one")
                row = {**got, "tokens": runs["big"]["tokens"] - runs["small"]["tokens"]}
                row["rc"] = [runs["small"]["rc"], runs["big"]["rc"]]
                out.setdefault(name, []).append(row)
                bench.log(f"round {rnd + 1}: {name} {row['us_per_token']:.2f} µs/token")
    Path(os.environ.get("AB_OUT", "ab.json")).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
