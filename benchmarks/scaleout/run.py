"""Does tuning on 2 slots take half the wall time of 1? (issue 13) The same 4 llama.cpp variants, side by side in one
script run, on one slot and on two:

- `local`: today's executor, one launch at a time in the tune process;
- `ray` on a real local Ray cluster (`ray start` on loopback: a head and one worker node, `fake_gpu: 1` each standing
  in for a GPU), first asking for `one_slot` (a resource only the head has: one launch at a time, Ray's own overhead
  included), then for `fake_gpu` (two launches at once, one per node);
- `local-gpus` with fake GPU ids: `--gpus 0` (one slot process) and `--gpus 0,1` (two side by side).

    python -m benchmarks.scaleout.run                 # ~5 min on 2 cores (run it under flock on a shared machine)
    python -m benchmarks.scaleout.run --output-tokens 512 --repeats 2   # shorter runs: fixed costs weigh more

Every run is `servetune tune` as a user runs it (a subprocess, its own wall clock from start to exit, reports
written); the cluster is started once before the timed runs (an existing cluster, as the docs describe) and stopped
by its own process ids afterwards. Writes `results.json` beside this file and prints the table for `RESULTS.md`:
wall time, the ratio to the same executor's one-slot run and to `local`, the winner and the ranking (the same
variants in the same places?), and whether results.json has the same keys as `local`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.stats import json_schema  # (the schema check the tests make)

HERE = Path(__file__).resolve().parent


EXPERIMENT = """
name: scaleout-bench
engine:
  engine: llamacpp
  model: tiny
  flags: {{ctx-size: 16384, parallel: 2, threads: 1}}
client: {{endpoint: completions, tokenizer: tiny}}
suite:
  repeats: {repeats}
  warmup_requests: 1
  probes:
    short_latency: {{max_tokens: 8}}
    decode_speed: {{output_tokens: {tokens}}}
objective: decode_tok_s
variants:
  matrix:
    baseline: two-slots
    changes:
      one-slot: {{parallel: 1}}
      three-slots: {{parallel: 3}}
      four-slots: {{parallel: 4}}
"""


def tune(exp: Path, out: Path, env: dict[str, str], *options: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "servetune", "tune", str(exp), "--out", str(out), *options]
    start = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(options)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    results = json.loads((out / "results.json").read_text())
    ranked = sorted((v for v in results["variants"] if v["rank"] is not None), key=lambda v: v["rank"])
    return {
        "options": " ".join(options),
        "wall_s": round(wall, 1),
        "ranking": [v["name"] for v in ranked],
        "tied_with_winner": sorted(v["name"] for v in ranked if v["rank"] == 1 or v["tie_with_winner"]),
        "decode_tok_s": {v["name"]: round(_objective(v), 1) for v in ranked},
        "engine_s": round(sum(v["wall_s"] or 0.0 for v in results["variants"]), 1),
        "ran_on": sorted({(v["ran_on"] or "").split("; engine pid")[0] for v in results["variants"]}),
        "statuses": sorted({v["status"] for v in results["variants"]}),
        "shape": json_schema({k: v for k, v in results.items() if k != "experiment"}),
    }


def _objective(variant: dict[str, Any]) -> float:
    values = [r["figures"]["decode_tok_s"] for r in variant["runs"] if r["probe"] == "decode_speed"]
    return sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-tokens", type=int, default=2048, help="decode_speed's answer length")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--work", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    args = parser.parse_args()

    from tests.scaleout.cluster import RayCluster

    from servetune.tiny.cache import tiny_model

    tiny_model()  # built once before any timed run
    work = args.work or Path(tempfile.mkdtemp(prefix="st-scaleout-"))
    work.mkdir(parents=True, exist_ok=True)
    exp = work / "scaleout.yaml"
    exp.write_text(EXPERIMENT.format(repeats=args.repeats, tokens=args.output_tokens))
    rows: dict[str, dict[str, Any]] = {}
    load_at_start = os.getloadavg()
    started = time.monotonic()
    with RayCluster(workers=1, head_extra={"one_slot": 1}) as cluster:
        cluster_s = time.monotonic() - started
        env = cluster.env()
        ray = ["--executor", "ray", "--ray-address", cluster.address]
        runs = {
            "local (1 slot)": ["--executor", "local"],
            "ray, 1 slot": [*ray, "--ray-resource", "one_slot"],
            "ray, 2 slots": [*ray, "--ray-resource", "fake_gpu"],
            "local-gpus, 1 slot": ["--executor", "local-gpus", "--gpus", "0"],
            "local-gpus, 2 slots": ["--executor", "local-gpus", "--gpus", "0,1"],
        }
        for i, (name, options) in enumerate(runs.items()):
            rows[name] = tune(exp, work / f"run{i}", env, *options)
            print(f"{name}: {rows[name]['wall_s']} s, ranking {rows[name]['ranking']}", flush=True)
    base = rows["local (1 slot)"]
    shapes = {name: row.pop("shape") for name, row in rows.items()}
    for name, row in rows.items():
        one = rows[name.replace("2 slots", "1 slot")] if "2 slots" in name else row
        row["vs_1_slot"] = round(row["wall_s"] / one["wall_s"], 3)
        row["vs_local"] = round(row["wall_s"] / base["wall_s"], 3)
        row["same_ranking_as_local"] = row["ranking"] == base["ranking"]
        row["same_winner_as_local"] = row["ranking"][:1] == base["ranking"][:1]
        row["same_ties_as_local"] = row["tied_with_winner"] == base["tied_with_winner"]
        row["same_schema_as_local"] = shapes[name] == shapes["local (1 slot)"]
    out = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "load_average": {"at_start": load_at_start, "at_end": os.getloadavg()},
        "settings": {"output_tokens": args.output_tokens, "repeats": args.repeats, "variants": 4},
        "cluster_start_s": round(cluster_s, 1),
        "runs": rows,
    }
    (HERE / "results.json").write_text(json.dumps(out, indent=2) + "\n")
    head = "| run | wall s | vs its 1 slot | vs local | ranking | tied with the winner | = local's | schema = local's |"
    print("\n" + head)
    print("|---|---:|---:|---:|---|---|---|---|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['wall_s']} | {row['vs_1_slot']:.2f} | {row['vs_local']:.2f} | "
            f"{', '.join(row['ranking'])} | "
            f"{len(row['tied_with_winner'])} of {len(row['ranking'])} | "
            f"{'yes' if row['same_ties_as_local'] else 'no'} | {'yes' if row['same_schema_as_local'] else 'no'} |"
        )
    print(f"\ncluster start (not timed in the runs): {cluster_s:.1f} s; results: {HERE / 'results.json'}")


if __name__ == "__main__":
    main()
