"""A SYNTHETIC 16-variant table in the format of the measured one, for proving the replay study's machinery
before the H200 grid is complete. Its figures are drawn from the noise model below, not measured: a result on it
says that the study runs and what it reports, never how a strategy does on real vLLM.

    .venv/bin/python -m benchmarks.tuning_table.synthetic [--seed 0] [--out benchmarks/tuning_table/synthetic]

The model, per variant (kv-cache-dtype × max-num-batched-tokens × max-num-seqs of grid.json) and repeat k:

- Anchors (measured, piece 1): the default row kv auto / mnbt 8192 / mns 256 and its mns 64 neighbour, means of
  their three repeats: (a) 1104 vs 956 output tok/s, TTFT p99 5640 vs 8705 ms; (b) 7.05 vs 6.77 req/s; (c) 23.3 vs
  23.6 ms; starts 233 / 229 s cold, a warm-up of ~9.5 s, repeats of 17 / 12 / 10.5 s.
- Effects of the unmeasured factors (ASSUMED; multiplicative on the default row): mnbt 2048 / 4096 / 16384 →
  (a) tok/s ×0.99 / 1.00 / 1.005 and TTFT p99 ×0.31 / 0.60 / 1.30 (the 2026-12 campaign's c64 grid probe: 2048 vs
  8192 gave the same throughput and 0.31× the p99 TTFT), (b) goodput ×1.15 / 1.08 / 0.95, (c) TPOT p50 ×0.90 / 0.95 /
  1.05; fp8 KV → (a) ×1.03 tok/s, ×0.98 TTFT, (b) ×1.02, (c) ×0.97; mns 64 as measured.
- Noise, split as the two measured cells split it. Every repeat k of every cell was measured on the same load
  draw (seed k), so a figure's log over the 2 cells × 3 repeats decomposes into a cell effect, a repeat effect
  shared by the cells — the draw's share, common to every variant — and a residual, each cell's own noise (its
  sd from the residuals, 2 degrees of freedom: rough). Measured: (a) tok/s no shared share (a closed loop of
  fixed lengths draws nothing; factors 0.997 / 1.000 / 1.003) and sd 0.5% of its own, TTFT p99 sd 3%; (b) goodput
  at 10 req/s a shared factor 0.814 / 0.989 / 1.242 for seeds 200 / 201 / 202 and 2.9% of its own (so ~95% of a
  repeat's variance is the draw's); (c) TPOT p50 at 4 req/s a shared 1.197 / 0.923 / 0.905 and 12% of its own
  (~55% the draw's). The model draws each cell's repeat k as mean × shared factor k × its own noise; starts sd 2%,
  repeat times sd 2%.
- SLOs picked so that the answer is not the defaults: (a) TTFT p99 ≤ 3000 ms (only mnbt 2048 meets it); (b) TTFT ≤
  1000 ms and TPOT ≤ 60 ms per request (grid.json's).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

BASE = {"a_tok_s": 1104.0, "a_ttft_p99": 5640.0, "b_goodput": 7.05, "c_tpot": 23.3}
MNS64 = {"a_tok_s": 956.0 / 1104.0, "a_ttft_p99": 8705.0 / 5640.0, "b_goodput": 6.77 / 7.05, "c_tpot": 23.6 / 23.3}
MNBT = {
    8192: {"a_tok_s": 1.0, "a_ttft_p99": 1.0, "b_goodput": 1.0, "c_tpot": 1.0},
    2048: {"a_tok_s": 0.99, "a_ttft_p99": 0.31, "b_goodput": 1.15, "c_tpot": 0.90},
    4096: {"a_tok_s": 1.00, "a_ttft_p99": 0.60, "b_goodput": 1.08, "c_tpot": 0.95},
    16384: {"a_tok_s": 1.005, "a_ttft_p99": 1.30, "b_goodput": 0.95, "c_tpot": 1.05},
}
FP8 = {"a_tok_s": 1.03, "a_ttft_p99": 0.98, "b_goodput": 1.02, "c_tpot": 0.97}
SEED_FACTOR = {"b_goodput": (0.814, 0.989, 1.242), "c_tpot": (1.197, 0.923, 0.905)}
"""The draw's share of a repeat, common to every cell (the measured cells' repeat effects, see the docstring)."""
NOISE_SD = {"a_tok_s": 0.005, "a_ttft_p99": 0.03, "b_goodput": 0.029, "c_tpot": 0.122}
"""Each cell's own noise per repeat (the measured cells' residual sd, log scale)."""
WALL_S = {"a_tput": 17.2, "b_goodput": 12.0, "c_tpot": 10.5}
SLO_A_TTFT_P99_MS = 3000


def true_means(factors: dict) -> dict[str, float]:
    """The model's mean of each objective figure for one variant (see the module docstring)."""
    out = dict(BASE)
    for key in out:
        out[key] *= MNBT[factors["max-num-batched-tokens"]][key]
        if factors["max-num-seqs"] == 64:
            out[key] *= MNS64[key]
        if factors["kv-cache-dtype"] == "fp8":
            out[key] *= FP8[key]
    return out


def rows(grid: dict, rng: random.Random) -> tuple[list[dict], list[dict]]:
    table, variants = [], []
    for n, v in enumerate(grid["variants"]):
        f = v["factors"]
        mean = true_means(f)
        slow = 1.13 if f["max-num-seqs"] == 64 else 1.0  # mns 64 queues half of probe (a)'s streams
        variants.append(
            {
                "variant": v["id"],
                "kv_cache_dtype": f["kv-cache-dtype"],
                "max_num_batched_tokens": f["max-num-batched-tokens"],
                "max_num_seqs": f["max-num-seqs"],
                "outcome": "ready",
                "complete": True,
                "ready_s": round(231 * rng.gauss(1, 0.02), 2),
                "warmup_s": round(9.5 * rng.gauss(1, 0.02), 2),
                "compile_cache": "cold",
                "cache_key": f"synthetic{n:02d}",
            }
        )
        for k in range(3):

            def draw(key: str, k: int = k, mean: dict[str, float] = mean) -> float:
                shared = SEED_FACTOR[key][k] if key in SEED_FACTOR else 1.0
                return mean[key] * shared * rng.gauss(1, NOISE_SD[key])

            common = {
                "variant": v["id"],
                "kv_cache_dtype": f["kv-cache-dtype"],
                "max_num_batched_tokens": f["max-num-batched-tokens"],
                "max_num_seqs": f["max-num-seqs"],
                "repeat": k + 1,
                "outcome": "ok",
                "failed": 0,
            }
            tok_s, ttft99 = draw("a_tok_s"), draw("a_ttft_p99")
            table.append(
                common
                | {
                    "probe": "a_tput",
                    "objective": "a",
                    "objective_value": round(tok_s, 2),
                    "output_tok_s": round(tok_s, 2),
                    "request_per_s": round(tok_s / 128, 2),
                    "ttft_p99_ms": round(ttft99, 2),
                    "ttft_p50_ms": round(ttft99 * 0.45, 2),
                    "completed": 128,
                    "wall_s": round(WALL_S["a_tput"] * slow * rng.gauss(1, 0.02), 3),
                }
            )
            goodput = min(draw("b_goodput"), 10.0)
            table.append(
                common
                | {
                    "probe": "b_goodput",
                    "objective": "b",
                    "objective_value": round(goodput, 2),
                    "goodput_req_s": round(goodput, 2),
                    "request_per_s": round(8.3 * rng.gauss(1, 0.03), 2),
                    "completed": 96,
                    "wall_s": round(WALL_S["b_goodput"] * rng.gauss(1, 0.02), 3),
                }
            )
            tpot = draw("c_tpot")
            table.append(
                common
                | {
                    "probe": "c_tpot",
                    "objective": "c",
                    "objective_value": round(tpot, 2),
                    "tpot_p50_ms": round(tpot, 2),
                    "request_per_s": round(3.3 * rng.gauss(1, 0.03), 2),
                    "completed": 32,
                    "wall_s": round(WALL_S["c_tpot"] * rng.gauss(1, 0.02), 3),
                }
            )
    return table, variants


def write(out: Path, seed: int) -> None:
    from benchmarks.tuning_table.build_table import TABLE_COLUMNS, VARIANT_COLUMNS, write_csv

    grid = json.loads((HERE / "grid.json").read_text())
    grid["table"] = "SYNTHETIC_" + grid["table"]
    grid["synthetic"] = True
    grid["synthetic_note"] = (
        f"not measured: drawn by benchmarks/tuning_table/synthetic.py --seed {seed} from its documented noise model"
    )
    grid["slos"]["a"]["ttft_p99_ms"] = SLO_A_TTFT_P99_MS
    table, variants = rows(grid, random.Random(seed))
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.json").write_text(json.dumps(grid, indent=1) + "\n")
    write_csv(out / "table.csv", TABLE_COLUMNS, table)
    write_csv(out / "variants.csv", VARIANT_COLUMNS, variants)
    scored = {"goodput": {"b_goodput": dict(grid["slos"]["b"])}, "note": "synthetic: see grid.json"}
    (out / "table.json").write_text(json.dumps(scored, indent=1) + "\n")
    (out / "README.md").write_text(
        "# SYNTHETIC table (not measured)\n\n"
        f"Drawn by `.venv/bin/python -m benchmarks.tuning_table.synthetic --seed {seed}` from the noise model in its "
        "docstring, in the format of the measured table one folder up, so that the replay study "
        "(`replay.py`) can be run on 16 variants before the H200 grid is complete. It proves the machinery, "
        "not the claim: no figure here was measured.\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "synthetic"))
    a = ap.parse_args()
    write(Path(a.out), a.seed)
    print(f"wrote the SYNTHETIC table to {a.out}")


if __name__ == "__main__":
    main()
