"""Simulator fidelity on the 2026-12 device campaign: fit on the pre-registered fit points, score the held-out ones.

    .venv/bin/python -m benchmarks.device_campaign.fidelity            # fit + score, writes files
    .venv/bin/python -m benchmarks.device_campaign.fidelity --no-fit   # score the committed profiles

Every startup's points are replayed in the order they ran, on one simulated server per startup
(`servetune.sim.calibration.replay_launch`), with each point's exact requests: lengths from the records, the load
shape from its summary (closed loop with its warm-up, the burst, the Poisson arrivals by rate and seed), and the
prompts' content keyed by (workload seed, index) so that the dense and MoE servers' prefix-cache hits across
points happen where vLLM's did (the replay's hit rate per point is printed beside vLLM's, from /metrics).
Records are read with `one_chunk_per_token=False` (README "What went wrong" 4).

The fit (`servetune.sim.calibration.fit_coefficients`) uses only the points `split.json` lists as fit points, per
model (a calibration profile is per GPU + model + vLLM version), replaying the startup's earlier points for their
state; left out of the fit: M1/G_c8, whose first measured wave stalled on Triton JIT compilation (README 5).
Held out: every other point, and every point of H2 (scored with H1's profile: same model, other flags).

Writes beside this file: `FIDELITY.md` (the tables, per model version), `fidelity_<version>.csv` (every point and
figure), `profiles/h200_<model>_vllm0.24.0.json` (the fitted profiles, `--calibration` for sim-serve/estimate/tune).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from dataclasses import replace
from pathlib import Path

from servetune.metrics.summary import Summary, summarize
from servetune.sim.calibration import (
    MeasuredRun,
    fit_coefficients,
    measured_summary,
    replay_launch,
)
from servetune.sim.fitting import deployment_for
from servetune.sim.profile import CalibrationProfile
from servetune.sim.results import measured_run
from servetune.sim.steptime import (
    PREFILL_LAUNCH_ATTENTION_LAYER_S,
    PREFILL_LAUNCH_LINEAR_LAYER_S,
    StepCoefficients,
)

HERE = Path(__file__).resolve().parent


DATA = HERE / "data"
PROFILES = HERE / "profiles"
VERSION = "0.24.0"
EXCLUDED = {"M1/G_c8": "first measured wave stalled on Triton JIT compilation of fused_moe (TTFT up to 3.4 s)"}
PROFILE_OF = {"H1": "H1", "H2": "H1", "D1": "D1", "M1": "M1", "X1": "X1"}
"""Which startup's fit scores a startup (H2 is the same model as H1 with other flags)."""
FIGURES = (
    ("ttft_p50", "TTFT p50", "ms"),
    ("ttft_p99", "TTFT p99", "ms"),
    ("tpot_p50", "TPOT p50", "ms"),
    ("output_throughput", "output tok/s", "tok/s"),
)
MODEL_VERSIONS = {
    "v0": "the simulator at 737d28c (main before this work): roofline step = GPU time only, async scheduling as a "
    "one-step admission lag, per-request API time in parallel; default coefficients; the campaign's replay "
    "(`compare.py`: no prefix-cache state carried across points) — `sim_baseline.csv`, copied",
    "v1-default": "this work's step model (CPU launch / GPU pipeline of async scheduling, eager launch cost of "
    "steps with prompt tokens, API server one request at a time), default coefficients, replay with the "
    "prefix-cache state of each startup",
    "v1-fitted": "the same model with the per-model profile fitted on the fit points (`profiles/`)",
}


NOTES = """## What changed in the model, and why (v0 → v1)

The per-step timelines of the records (every running request gets a token at each step's end, so the union of
chunk times shows each step) showed three things the v0 model did not have:

1. **A step with prompt tokens costs a launch, not just its FLOPs.** On the hybrid (Gated-DeltaNet) shapes a step
   that mixes one ~512-token prompt into a batch of decodes took 110-175 ms against 15 ms decode steps and ~45 ms
   of prefill FLOPs (H1/poisson_hi; the same in the fit points: H1/decode_c1's idle 1024-token TTFT is 164 ms,
   the roofline says ~95). vLLM runs decode-only batches as one CUDA graph, mixed batches as piecewise graphs with
   the attention and GDN ops launched eagerly in between. Modelled as CPU time per step (`cpu_step_s`, plus
   `cpu_prefill_step_s` when the step has prompt tokens; default from the layers: 0.5 ms per attention layer,
   4 ms per GDN layer), fitted per model: 149 ms (Qwen3.6-27B), 168 ms (Qwen3.6-35B-A3B), 32 ms (Qwen3-32B),
   23 ms (Qwen3-30B-A3B).
2. **Async scheduling is a two-step pipeline.** vLLM plans and launches step k+1 while step k runs and hands step
   k's tokens to the API server only after launching k+1; a step's kernels run as they are launched. So a step
   lasts max(its GPU work, the next step's launch), a request arriving mid-step joins two steps later, and a
   prompt's first token waits for the next step's launch (X1/G_c8: the first request of a wave gets its first
   token in the same step group as the 7 requests that arrived after it). v0 approximated this by a one-step
   admission lag and priced steps as GPU time only (`engine.py` has the recurrence).
3. **MoE layers have a fixed cost per step.** One-stream decode of Qwen3-30B-A3B and Qwen3.6-35B-A3B took 4.3-4.4
   ms against 2.3 ms for the bytes of the experts a token touches (the roofline already counts touched experts
   only: 8 of 128 at batch 1, all at 64): 50 us per MoE layer per step (routing, token sorting, grouped-GEMM
   launches), now in the planner's roofline (`Efficiency.moe_layer_overhead_s`), so it also moves `servetune
   plan`'s decode speeds of MoE models.

Also: the API server parses requests one at a time (`request_overhead_s` each, a FIFO: a 128-request burst reaches
the engine spread over the burst's parsing), the replay carries each startup's prefix-cache state across its
points with prompts keyed by (workload seed, index) (the dense and MoE servers' hit rates per point are reproduced
to the percent: column "prefix hits"), and the fit (`fit_coefficients`) starts Nelder-Mead from the best of 48
seeded random points (a single start stopped in a valley where a low prefill MFU stood in for the launch cost).

**How the mechanisms were found.** Items 1-3 were read off step timelines of fit and held-out points alike
(poisson_hi's ITL pattern made item 1 plain); no coefficient was fitted on a held-out point, but the model's
structure was chosen after looking at held-out timelines. The v1-default table shows what the structure alone
gives with planning values.

## Where it still misses (held out)

- **H2/G_c8, TTFT +44%** (max-num-batched-tokens 2048, H1's profile). H2's prompt-carrying steps took 90-115 ms
  for 1536 tokens where H1's took ~150 ms for 512: the launch cost depends on the token budget (vLLM compiles and
  sizes buffers per max_num_batched_tokens), which one fitted budget cannot show. G_c32/G_c64 of H2 are within
  10%. A profile fitted at the budget the user runs (one more calibration point) removes it.
- **D1/burst_c128 (TTFT -64%) and M1/burst_c128 (-27%)**, the two prefix-cache-hit bursts: 97% of their prompt
  tokens hit, so their TTFT is the API server's admission of 128 requests (D1: first tokens spread over 86-521 ms),
  and the fit points (closed loops, no burst: burst_c32 was not run) put the per-request API time at 0.7-1.6 ms,
  where these bursts imply ~3.5 and ~1.8 ms. The per-request time is fitted per model and poorly constrained by the
  fit points.
- **H1/burst_c128 TPOT +19%, TTFT -13%**: the real burst ended with two 8192-token steps of ~350 ms where every other
  such step took ~700 ms (also once in G_c64); unexplained, so not modelled.
- M1/G_c8 (a fit point) is left out: its first measured wave stalled on Triton JIT compilation.

"""


def startup_runs(manifest: dict, sid: str) -> list[MeasuredRun]:
    """Every point a startup ran, in order, as measured runs (the warm-up point unscored)."""
    plan = next(s for s in manifest["plan"]["startups"] if s["id"] == sid)
    dep = deployment_for(HERE / "models" / plan["model"] / "config.json", "H200", VERSION, plan["flags"])
    runs = []
    for point, result in manifest["startups"][sid]["points"].items():
        if result.get("outcome") != "ok":
            continue
        run = measured_run(DATA / sid / f"{point}.jsonl", dep, f"{sid}/{point}", launch=sid, one_chunk_per_token=False)
        runs.append(replace(run, scored=point != "warmup"))
    return runs


def roles(split: dict) -> dict[str, str]:
    out = {name: "fit" for name in split["simulator"]["fit"]}
    out.update({name: "held out" for name in split["simulator"]["held_out"]})
    out.update({name: "excluded" for name in EXCLUDED})
    return out


def fit_runs(runs: list[MeasuredRun], role: dict[str, str]) -> list[MeasuredRun]:
    """The runs up to the startup's last fit point, only the fit points scored."""
    last = max(i for i, r in enumerate(runs) if role.get(r.name) == "fit")
    return [replace(r, scored=role.get(r.name) == "fit") for r in runs[: last + 1]]


def figures(summary: Summary) -> dict[str, float | None]:
    return {
        "ttft_p50": summary.ttft_ms.p50,
        "ttft_p99": summary.ttft_ms.p99,
        "tpot_p50": summary.tpot_ms.p50,
        "output_throughput": summary.output_throughput,
    }


def vllm_hit_rate(name: str) -> float | None:
    """vLLM's prefix-cache hits / queries (tokens) over a point, from /metrics before and after (read as
    servetune reads an engine's counters: `servetune.metrics.prometheus`)."""
    from servetune.metrics.prometheus import delta, parse

    before, after = (DATA / f"{name}.metrics.{side}.prom" for side in ("before", "after"))
    if not before.exists() or not after.exists():
        return None
    return delta(parse(before.read_text()), parse(after.read_text())).prefix_cache_hit_rate


def pct(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or real == 0 or math.isnan(sim) or math.isnan(real):
        return None
    return 100.0 * (sim - real) / real


def score(all_runs: dict[str, list[MeasuredRun]], coefs: dict[str, StepCoefficients | None], role: dict) -> list:
    rows = []
    for sid, runs in all_runs.items():
        coef = coefs.get(PROFILE_OF[sid])
        replayed = replay_launch(runs, coef)
        for run in runs:
            if not run.scored:
                continue
            real = figures(measured_summary(run))
            sim = figures(summarize(replayed[run.name].records))
            row = {
                "startup": sid,
                "point": run.name.split("/")[1],
                "role": role.get(run.name, "held out" if sid == "H2" else "?"),
                "kind": run.shape.kind if run.shape.rate != math.inf else "burst",
                "requests": len(run.measured),
                "hit_vllm": vllm_hit_rate(run.name),
                "hit_sim": replayed[run.name].prefix_hit_rate,
            }
            for key, _, _ in FIGURES:
                row[f"{key}_real"], row[f"{key}_sim"] = real[key], sim[key]
                row[f"{key}_err_pct"] = pct(sim[key], real[key])
            rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _num(v: str) -> object:
    if v in ("", "None"):
        return None
    try:
        return float(v)
    except ValueError:
        return v


def profile_path(sid: str, manifest: dict) -> Path:
    model = next(s["model"] for s in manifest["plan"]["startups"] if s["id"] == sid)
    return PROFILES / f"h200_{model}_vllm{VERSION}.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-fit", action="store_true", help="score with the committed profiles instead of fitting")
    ap.add_argument("--iters", type=int, default=300, help="Nelder-Mead iterations per model")
    ap.add_argument("--only", default="", help="comma-separated startups (default: all that ran points)")
    args = ap.parse_args()
    t0 = time.monotonic()
    manifest = json.loads((DATA / "manifest.json").read_text())
    role = roles(json.loads((HERE / "split.json").read_text()))
    sids = [s for s in manifest["startups"] if manifest["startups"][s].get("points") and s in PROFILE_OF]
    if args.only:
        sids = [s for s in sids if s in args.only.split(",")]
    all_runs = {sid: startup_runs(manifest, sid) for sid in sids}
    fitted: dict[str, StepCoefficients | None] = {}
    PROFILES.mkdir(exist_ok=True)
    for sid in sorted(set(PROFILE_OF[s] for s in sids)):
        path = profile_path(sid, manifest)
        if args.no_fit:
            fitted[sid] = CalibrationProfile.load(path).coefficients
            continue
        runs = fit_runs(all_runs[sid], role)
        t = time.monotonic()
        coef, errors = fit_coefficients(runs, iters=args.iters)
        print(f"fitted {sid} in {time.monotonic() - t:.0f} s: {coef.model_dump()}", flush=True)
        dep = runs[0].deployment
        CalibrationProfile(
            gpu=dep.timing.gpu.name,
            model=next(s["model"] for s in manifest["plan"]["startups"] if s["id"] == sid),
            engine_version=VERSION,
            coefficients=coef,
            fitted_on=[r.name for r in runs if r.scored],
            fit_errors=errors,
            created="2026-12-01",
        ).save(path)
        fitted[sid] = coef
    tables = {
        "v1-default": score(all_runs, {}, role),
        "v1-fitted": score(all_runs, fitted, role),
    }
    for version, rows in tables.items():
        write_csv(HERE / f"fidelity_{version}.csv", rows)
    base = baseline_rows(read_csv(HERE / "sim_baseline.csv"))
    (HERE / "FIDELITY.md").write_text(render(tables, base, fitted, manifest, time.monotonic() - t0, not args.no_fit))
    print((HERE / "FIDELITY.md").read_text())


def stats(rows: list[dict], key: str) -> str:
    vals = [abs(r[f"{key}_err_pct"]) for r in rows if r.get(f"{key}_err_pct") is not None]
    if not vals:
        return "— | — | —"
    return f"{sum(vals) / len(vals):.1f}% | {max(vals):.1f}% | {sum(v <= 10 for v in vals)}/{len(vals)}"


def fmt(x: object, nd: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def err(x: object) -> str:
    return "—" if x is None else f"{x:+.1f}%"


def hit(x: object) -> str:
    return "off" if x is None else f"{100 * float(x):.0f}%"  # type: ignore[arg-type]


def summary_table(title: str, groups: list[tuple[str, list[dict]]]) -> list[str]:
    out = [
        f"### {title}",
        "",
        "| points | n | metric | mean abs error | max abs error | within 10% |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for label, rows in groups:
        for key, name, _ in FIGURES:
            out.append(f"| {label} | {len(rows)} | {name} | {stats(rows, key)} |")
    return [*out, ""]


def point_table(rows: list[dict], with_hits: bool) -> list[str]:
    out = [
        "| startup | point | role | kind | n | prefix hits vLLM / sim | TTFT p50 real / sim ms | err | TTFT p99 err "
        "| TPOT p50 real / sim ms | err | out tok/s real / sim | err |",
        "|---|---|---|---|---:|---|---|---:|---:|---|---:|---|---:|",
    ]
    for r in rows:
        hits = f"{hit(r['hit_vllm'])} / {hit(r['hit_sim'])}" if with_hits else hit(r["hit_vllm"])
        out.append(
            f"| {r['startup']} | {r['point']} | {r['role']} | {r['kind']} | {fmt(r['requests'], 0)} | {hits} "
            f"| {fmt(r['ttft_p50_real'])} / {fmt(r['ttft_p50_sim'])} | {err(r['ttft_p50_err_pct'])} "
            f"| {err(r['ttft_p99_err_pct'])} | {fmt(r['tpot_p50_real'])} / {fmt(r['tpot_p50_sim'])} "
            f"| {err(r['tpot_p50_err_pct'])} | {fmt(r['output_throughput_real'])} / {fmt(r['output_throughput_sim'])} "
            f"| {err(r['output_throughput_err_pct'])} |"
        )
    return [*out, ""]


def baseline_rows(base: list[dict]) -> list[dict]:
    """`sim_baseline.csv` (compare.py's names) in this script's names."""
    out = []
    for r in base:
        row = {
            "startup": r["startup"],
            "point": r["point"],
            "role": "held out" if r["role"] == "held_out" else r["role"],
            "kind": r["kind"],
            "requests": r["measured_requests"],
            "hit_vllm": r["prefix_cache_hit_rate"],
            "hit_sim": None,
        }
        for key, _, _ in FIGURES:
            old = key if key == "output_throughput" else key.replace("_p", "_ms_p")
            for side in ("real", "sim", "err_pct"):
                row[f"{key}_{side}"] = r[f"{old}_{side}"]
        out.append(row)
    return out


def groups_of(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    held = [r for r in rows if r["role"] == "held out"]
    clean = [r for r in held if not (r["hit_vllm"] or 0) > 0.05]
    return [
        ("held out", held),
        ("held out, no prefix-cache hits", clean),
        ("fit", [r for r in rows if r["role"] == "fit"]),
    ]


def render(
    tables: dict[str, list[dict]], base: list[dict], fitted: dict, manifest: dict, seconds: float, refit: bool
) -> str:
    out = ["# Simulator fidelity on the 2026-12 device campaign (issue 11 item 2)", ""]
    out += [
        f"Written by `fidelity.py` in {seconds:.0f} s ("
        + ("fitting the profiles" if refit else "`--no-fit`: scoring the committed profiles")
        + "). Fit points and held-out points are `split.json`'s, fixed "
        "before the run; the fit uses only fit points, per model; H2 is scored with H1's profile. Left out of the "
        "fit: " + "; ".join(f"{k} ({v})" for k, v in EXCLUDED.items()) + ". Errors are (sim − real) / real of the "
        "point's measured requests (vLLM's definitions, `servetune.metrics.summary`).",
        "",
        "Model versions:",
        "",
        *[f"- **{v}**: {text}." for v, text in MODEL_VERSIONS.items()],
        "",
    ]
    out.append(NOTES)
    out.append("## Held-out error summary, per model version")
    out.append("")
    out += summary_table("v1-fitted (this work, calibrated on the fit points)", groups_of(tables["v1-fitted"]))
    out += summary_table("v1-default (this work, uncalibrated)", groups_of(tables["v1-default"]))
    out += summary_table("v0 (before this work; RESULTS.md)", groups_of(base))
    out += ["## Every point, v1-fitted", "", *point_table(tables["v1-fitted"], True)]
    out += ["## Every point, v1-default", "", *point_table(tables["v1-default"], True)]
    out += ["## Every point, v0 (copied from `sim_baseline.csv`)", "", *point_table(base, False)]
    out += ["## Fitted coefficients (profiles/)", ""]
    out += [
        "| profile | bandwidth | MFU prefill | MFU decode | GPU step ms | GPU per seq µs | API per request ms "
        "| CPU step ms | CPU prefill step ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for sid, coef in fitted.items():
        if coef is None:
            continue
        e = coef.efficiency
        out.append(
            f"| {profile_path(sid, manifest).name} | {e.bandwidth:.3f} | {e.mfu_prefill:.3f} | {e.mfu_decode:.3f} | "
            f"{e.step_overhead_s * 1e3:.2f} | {coef.per_seq_overhead_s * 1e6:.1f} | "
            f"{coef.request_overhead_s * 1e3:.2f} | {coef.cpu_step_s * 1e3:.2f} | "
            f"{(coef.cpu_prefill_step_s or 0) * 1e3:.1f} |"
        )
    d = StepCoefficients()
    out.append(
        f"| (defaults) | {d.efficiency.bandwidth} | {d.efficiency.mfu_prefill} | {d.efficiency.mfu_decode} | "
        f"{d.efficiency.step_overhead_s * 1e3:.2f} | {d.per_seq_overhead_s * 1e6:.1f} | "
        f"{d.request_overhead_s * 1e3:.2f} | {d.cpu_step_s * 1e3:.2f} | "
        f"{PREFILL_LAUNCH_ATTENTION_LAYER_S * 1e3:g} per attention layer + {PREFILL_LAUNCH_LINEAR_LAYER_S * 1e3:g} "
        "per GDN layer |"
    )
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
