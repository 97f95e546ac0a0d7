"""Fit the simulator on some measured points of real vLLM, score it on the held-out ones.

    .venv/bin/python -m benchmarks.sim_fidelity.fit_and_score --data benchmarks/device/<run>   # real data
    .venv/bin/python -m benchmarks.sim_fidelity.fit_and_score --standin /tmp/standin           # pipeline test

`--data` is a directory holding one sub-directory per flag setting (A, B) as `device_campaign.sh` writes
them (campaign.json, flags.txt, <point>.jsonl, vllm_startup.log). The calibration is fitted on the
points marked `fit` in fidelity_points.py, of setting A only; every other point (other loads, and the
whole of setting B, whose flags change the scheduler) is held out. Writes into --out (default: this
folder): the profile JSON, errors.csv (every point, default and calibrated coefficients) and RESULTS.md.

`--standin DIR` first writes a synthetic data set in the same layout from the simulator itself, with
known "true" coefficients, so the whole pipeline can be checked before device data exists (the fit
should then recover near-zero errors).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from pathlib import Path

from benchmarks.sim_fidelity.fidelity_points import FIT_SETTING, POINTS
from servetune.load.shape import LoadShape
from servetune.metrics.record import RequestRecord
from servetune.plan.roofline import Efficiency
from servetune.sim.calibration import (
    TARGETS,
    MeasuredRun,
    fit_coefficients,
    measured_summary,
    relative_errors,
    replay,
    simulated_summary,
    targets,
)
from servetune.sim.fitting import deployment_for
from servetune.sim.profile import CalibrationProfile
from servetune.sim.results import measured_run, read_flags
from servetune.sim.steptime import StepCoefficients

HERE = Path(__file__).resolve().parent


MODEL = "qwen3.6-27b"  # the bundled config of Qwen/Qwen3.6-27B: the shapes the device served
GPU = "H200"
VLLM_VERSION = "0.24.0"
SETTING_FLAGS = {
    "A": [
        "--max-model-len",
        "131072",
        "--language-model-only",
        "--additional-config",
        '{"gdn_prefill_backend":"triton"}',
    ],
    "B": [
        "--max-model-len",
        "131072",
        "--language-model-only",
        "--additional-config",
        '{"gdn_prefill_backend":"triton"}',
        "--max-num-seqs",
        "32",
        "--max-num-batched-tokens",
        "2048",
    ],
}
STANDIN_TRUTH = StepCoefficients(
    efficiency=Efficiency(bandwidth=0.81, mfu_prefill=0.58, mfu_decode=0.22, step_overhead_s=0.0011),
    per_seq_overhead_s=4e-5,
    request_overhead_s=0.006,
)
METRICS = TARGETS
NOTES = """
## Notes (read before quoting the numbers)

- **What was fitted, what is held out.** Six coefficients (bandwidth efficiency, prefill and decode MFU, per-step,
  per-sequence and per-request overheads) on three points of setting A (9 targets). Held out: the 8k prefill, the
  concurrency curve 1/8/16/32, and all of setting B, whose flags (`--max-num-seqs 32 --max-num-batched-tokens
  2048`) change the scheduler's batches; capacity is never fitted (it is the planner's, table above).
- **The model was revised once after seeing these data, and the revision is a real vLLM behaviour.** The first
  fit (synchronous scheduler, prior weight 0.01) gave held-out errors: TTFT mean 14.6% / max 34.2% (4/13 within
  10%), TPOT 3.4% / 6.6% (13/13), throughput 5.6% / 13.3% (10/13); the same with prior weight 0.001: TTFT 10.7% /
  29.2% (7/13), TPOT 3.3% / 7.0% (13/13), throughput 5.1% / 11.4% (12/13). TTFT under load was systematically
  short by about one step. The startup log says `Asynchronous scheduling is enabled.`: vLLM plans step k+1 while
  step k runs, so a request arriving during a step joins one step later. Modelled (`SimEngine`, default on from
  vLLM 0.20 except hybrid models with prefix caching), the fit gives the table at the top.
- **Measurement noise bounds what any simulator can show.** Identical requests and effective flags measured in A
  and B differ by up to 23% in median TTFT at one stream with 1k±25% prompts (3 usable requests; see the spread
  table). Curve points' TTFT medians (c8, c16) sit between two modes: the first wave of `concurrency` requests
  prefilled together, and the steady state; a median over 18-39 usable requests moves between them easily.
- **Data defect.** The campaign's first client skipped streamed chunks with empty text (random weights emit ids
  the local 32k tokenizer cannot decode), so about a quarter of the records lack some chunk times. Their load,
  end times and token counts are right and are replayed; their TTFT/TPOT are left out of both the measured and
  the simulated medians (`servetune.sim.results.measured_requests`). See ../device/README.md.
- **TPOT and throughput are within 10% on every held-out point; TTFT on 8 of 13.** The goal (10%) is met for
  TPOT and throughput, not for TTFT at small or bimodal samples.
- sim-serve over HTTP against the estimate engine on identical requests: `selfcheck.md` (TPOT and throughput
  within about 5%; TTFT differs most where a whole first wave arrives at once: the HTTP server receives the
  requests one by one and, with async scheduling, lets the later ones join a step later, while the estimate
  admits simultaneous arrivals together).
"""


def make_standin(dest: Path) -> None:
    """A synthetic campaign from the simulator with STANDIN_TRUTH coefficients (same files, same layout)."""
    import random

    for setting, flags in SETTING_FLAGS.items():
        out = dest / setting
        out.mkdir(parents=True, exist_ok=True)
        (out / "flags.txt").write_text("\n".join(flags) + "\n")
        dep = deployment_for(MODEL, GPU, VLLM_VERSION, flags)
        (out / "vllm_startup.log").write_text("\n".join(f"INFO {line}" for line in dep.startup_lines()) + "\n")
        for point in POINTS:
            rng = random.Random(f"0-{point.name}")
            asked = tuple(
                RequestRecord(index=i, prompt_tokens=p, output_tokens=o) for i, (p, o) in enumerate(point.lengths(rng))
            )
            shape = LoadShape.closed(point.concurrency, requests=len(asked))
            records = replay(MeasuredRun(point.name, shape, asked, dep), STANDIN_TRUTH)
            with (out / f"{point.name}.jsonl").open("w") as f:
                for r in records:
                    f.write(json.dumps({**r.model_dump(mode="json"), "concurrency": point.concurrency}) + "\n")
        (out / "campaign.json").write_text(json.dumps({"setting": setting, "standin": True}))


def setting_dirs(data: Path) -> dict[str, Path]:
    """Setting label → directory, for every campaign directory under `data`."""
    found = {}
    for manifest in sorted(data.rglob("campaign.json")):
        label = json.loads(manifest.read_text()).get("setting") or manifest.parent.name
        found[label] = manifest.parent
    if not found:
        raise SystemExit(f"no campaign.json under {data}: the device data has not arrived")
    return found


def with_logged_limits(label: str, directory: Path, dep, notes: list[str]):
    """The deployment with the scheduler limits vLLM logged, where they differ from the planner's.

    Speed is what this benchmark scores; capacity is compared apart (the table at the end), so a
    planner miss on, say, the default max_num_batched_tokens must not leak into the timing errors.
    """
    from dataclasses import replace

    from servetune.engines.vllm import parse_vllm_log

    log = directory / "vllm_startup.log"
    if not log.exists():
        return dep
    facts = parse_vllm_log(log.read_text(errors="replace"))
    changes = {}
    if facts.max_num_batched_tokens and facts.max_num_batched_tokens != dep.limits.max_num_batched_tokens:
        changes["max_num_batched_tokens"] = facts.max_num_batched_tokens
    if facts.block_size and facts.block_size != dep.limits.block_size:
        changes["block_size"] = facts.block_size
    if not changes:
        return dep
    notes.append(f"setting {label}: simulated with vLLM's logged {changes} (the planner said otherwise)")
    return replace(dep, limits=replace(dep.limits, **changes))


def capacity_rows(label: str, directory: Path, dep) -> list[str]:
    """Planner (= simulator) capacity against what vLLM logged at startup."""
    from servetune.engines.vllm import parse_vllm_log

    log = directory / "vllm_startup.log"
    if not log.exists():
        return [f"| {label} | (no startup log) | | | |"]
    facts = parse_vllm_log(log.read_text(errors="replace"))
    return [
        f"| {label} | block size | {facts.block_size} | {dep.limits.block_size} |",
        f"| {label} | available KV cache (GiB) | {facts.available_kv_gib} | {dep.available_kv_gib:.2f} |",
        f"| {label} | GPU KV cache size (tokens) | {facts.kv_cache_tokens} | {dep.kv_cache_tokens} |",
        f"| {label} | max concurrency at max_model_len | {facts.max_concurrency} | {dep.max_concurrency:.2f} |",
        f"| {label} | max_num_batched_tokens | {facts.max_num_batched_tokens or '(not logged)'} | "
        f"{dep.limits.max_num_batched_tokens} |",
    ]


def noise_rows(rows: list[dict]) -> list[str]:
    """The measurement's own noise: points whose requests and effective flags are the same in A and B
    (one stream; prompts within both token budgets), measured twice. A simulator cannot beat this."""
    same = ("decode_1x1024_512", "curve_c1")
    real = {(r["setting"], r["point"], r["metric"]): r["real"] for r in rows}
    out = [
        "",
        "## Run-to-run spread of the measurement (same requests and effective flags in A and B)",
        "",
        "| point | metric | A | B | (B - A) / A |",
        "|---|---|---:|---:|---:|",
    ]
    for point in same:
        for m in METRICS:
            a, b = real.get(("A", point, m)), real.get(("B", point, m))
            if a and b:
                out.append(f"| {point} | {m} | {fmt(m, a)} | {fmt(m, b)} | {(b - a) / a:+.1%} |")
    return out


def fmt(metric: str, value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value * 1000:.1f} ms" if metric.endswith("_s") else f"{value:.1f} tok/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path)
    ap.add_argument("--standin", type=Path, help="write a synthetic data set here first and use it")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    if args.standin:
        make_standin(args.standin)
        args.data = args.standin
    if not args.data:
        ap.error("give --data DIR or --standin DIR")
    t0 = time.time()
    dirs = setting_dirs(args.data)
    fit_names = {p.name for p in POINTS if p.fit}
    runs: dict[tuple[str, str], MeasuredRun] = {}
    deps = {}
    notes: list[str] = []
    for label, directory in dirs.items():
        flags = read_flags(directory) or SETTING_FLAGS.get(label, [])
        deps[label] = with_logged_limits(label, directory, deployment_for(MODEL, GPU, VLLM_VERSION, flags), notes)
        for point in POINTS:
            path = directory / f"{point.name}.jsonl"
            if path.exists():
                runs[(label, point.name)] = measured_run(path, deps[label], name=f"{label}/{point.name}")
    fit_runs = [r for (label, name), r in runs.items() if label == FIT_SETTING and name in fit_names]
    if not fit_runs:
        raise SystemExit(f"no fit points of setting {FIT_SETTING} in {args.data}")
    coef, fit_errors = fit_coefficients(fit_runs, iters=args.iters)
    profile = CalibrationProfile(
        gpu=GPU,
        model="Qwen3.6-27B (language model only, dummy weights)",
        engine_version=VLLM_VERSION,
        coefficients=coef,
        fitted_on=[r.name for r in fit_runs],
        fit_errors=fit_errors,
    )
    stem = "standin" if args.standin else "h200_qwen36-27b_vllm0.24.0"
    args.out.mkdir(parents=True, exist_ok=True)
    profile_path = args.out / f"profile_{stem}.json"
    profile.save(profile_path)

    default = StepCoefficients()
    rows = []
    for (label, name), run in runs.items():
        measured, with_default, with_fit = (
            measured_summary(run),
            simulated_summary(run, default),
            simulated_summary(run, coef),
        )
        real, sim_d, sim_c = targets(measured), targets(with_default), targets(with_fit)
        err_d = relative_errors(with_default, measured)
        err_c = relative_errors(with_fit, measured)
        role = "fit" if run in fit_runs else "held-out"
        for m in METRICS:
            rows.append(
                {
                    "setting": label,
                    "point": name,
                    "role": role,
                    "metric": m,
                    "real": real[m],
                    "sim_default": sim_d[m],
                    "sim_calibrated": sim_c[m],
                    "err_default": err_d.get(m, math.nan),
                    "err_calibrated": err_c.get(m, math.nan),
                    "requests": len(run.records),
                }
            )
    with (args.out / f"errors_{stem}.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    write_results(args, rows, profile, profile_path, dirs, deps, stem, time.time() - t0, notes)


def write_results(args, rows, profile, profile_path, dirs, deps, stem, elapsed, notes) -> None:
    held = [r for r in rows if r["role"] == "held-out" and not math.isnan(r["err_calibrated"])]
    lines = [
        f"# Simulator fidelity{' (STAND-IN: synthetic data from the simulator itself)' if args.standin else ''}",
        "",
        f"Data: `{args.data}`; model Qwen3.6-27B (dummy weights, language model only) on 1x{GPU}, vLLM {VLLM_VERSION}.",
        f"Fitted on setting {FIT_SETTING}: {', '.join(profile.fitted_on)}. Everything else is held out.",
        f"Profile: `{profile_path.name}`; per-point figures: `errors_{stem}.csv`. Script ran in {elapsed:.0f} s.",
        "Errors are (simulated - measured) / measured of the median TTFT, median TPOT "
        "((e2e - ttft)/(n - 1)) and output throughput over the point's measured requests.",
        *notes,
        "",
        "## Held-out error summary (calibrated)",
        "",
        "| metric | points | mean abs error | max abs error | within 10% |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in METRICS:
        errs = [abs(r["err_calibrated"]) for r in held if r["metric"] == m]
        if errs:
            lines.append(
                f"| {m} | {len(errs)} | {sum(errs) / len(errs):.1%} | {max(errs):.1%} | "
                f"{sum(e <= 0.10 for e in errs)}/{len(errs)} |"
            )
    lines += [
        "",
        "## Every point",
        "",
        "| setting | point | role | metric | measured | sim (defaults) | err | sim (calibrated) | err |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setting']} | {r['point']} | {r['role']} | {r['metric']} | {fmt(r['metric'], r['real'])} | "
            f"{fmt(r['metric'], r['sim_default'])} | {r['err_default']:+.1%} | "
            f"{fmt(r['metric'], r['sim_calibrated'])} | {r['err_calibrated']:+.1%} |"
        )
    lines += noise_rows(rows)
    eff = profile.coefficients.efficiency
    lines += [
        "",
        "## Calibrated coefficients",
        "",
        f"bandwidth {eff.bandwidth:.3f}, mfu_prefill {eff.mfu_prefill:.3f}, mfu_decode {eff.mfu_decode:.3f}, "
        f"step overhead {eff.step_overhead_s * 1e3:.2f} ms, per-sequence overhead "
        f"{profile.coefficients.per_seq_overhead_s * 1e6:.1f} us, request overhead "
        f"{profile.coefficients.request_overhead_s * 1e3:.2f} ms.",
        "",
        "## Capacity: vLLM's startup log vs the planner (= the simulator's pool)",
        "",
        "| setting | figure | vLLM logged | planner |",
        "|---|---|---:|---:|",
    ]
    for label, directory in dirs.items():
        lines += capacity_rows(label, directory, deps[label])
    if not args.standin:
        lines += ["", NOTES.strip()]
    (args.out / ("RESULTS_standin.md" if args.standin else "RESULTS.md")).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:20]))


if __name__ == "__main__":
    main()
