"""The per-part fit: per family, fit the simulator's step-time coefficients on `split.json`'s fit set only, and
score them on its held-out settings (issue 26).

    .venv/bin/python -m benchmarks.ttft_parts.fit_parts                       # every family with fit data
    .venv/bin/python -m benchmarks.ttft_parts.fit_parts --family moe --samples 8 --iters 60   # a quick one

The fit (`servetune.sim.calibration.fit_coefficients(..., by_part=True)`) matches, for every scored point of the fit
launches, the median TTFT, the median TPOT and the output throughput of the measured requests and vLLM's split of
the point's mean TTFT (its `/metrics` before and after: the prefill part and the wait before it), each launch
replayed in the order it ran. Fit launches: `split.json`'s `fit_data` (measured before the split was fixed) and the
starts of `data/parts/` that the plan measured as fit settings; held out: the starts measured at held-out settings.
A fit launch at a held-out setting is refused. Held-out points are repeated (`<point>_r<k>`): each is scored by
the error of its repeats' means beside their run-to-run spread (`table_check.py`'s rule).

Writes FIT_PARTS.md, fit_parts.csv (every scored point, fit and held out) and `profiles/h200_<model>_parts.json`
(the fitted coefficients, `--calibration` for estimate / sim-serve).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.ttft_parts.table_check import err, spread
from servetune.metrics.engine_time import engine_time
from servetune.metrics.prometheus import parse
from servetune.metrics.summary import summarize
from servetune.sim.calibration import (
    MeasuredRun,
    fit_coefficients,
    measured_summary,
    part_targets,
    replay_all,
    trusted,
)
from servetune.sim.fitting import deployment_for
from servetune.sim.profile import CalibrationProfile
from servetune.sim.results import run_of, to_record
from servetune.sim.steptime import StepCoefficients

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SPLIT = HERE / "split.json"
PARTS_DATA = HERE / "data/parts"
PROFILES = HERE / "profiles"
START = ROOT / "benchmarks/device_campaign/profiles"
"""Where a family's fit starts from, when the device campaign fitted its model (its launch is in the fit set)."""
FIGURES = (
    ("ttft_p50_ms", "TTFT p50"),
    ("tpot_p50_ms", "TPOT p50"),
    ("output_tok_s", "out tok/s"),
    ("prefill_ms", "prefill part"),
    ("wait_ms", "wait part"),
)


def _text(path: Path) -> str | None:
    for p in (path, path.with_name(path.name + ".gz")):
        if p.exists():
            return gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
    return None


def _flags(folder: Path) -> list[str]:
    """The launch's vLLM flags: its variant.json (tuning table), else its session manifest's plan."""
    if (folder / "variant.json").exists():
        return list(json.loads((folder / "variant.json").read_text())["flags"])
    manifest = json.loads((folder.parent / "manifest.json").read_text())
    return list(next(s for s in manifest["plan"]["startups"] if s["id"] == folder.name)["flags"])


def launch_runs(folder: Path, model: str) -> list[MeasuredRun]:
    """A launch's points in the order they ran (their start time), each with vLLM's split of its TTFT."""
    deployment = deployment_for(model, "H200", "0.24.0", _flags(folder))
    sides = sorted(
        ((json.loads(p.read_text()), p.name.removesuffix(".summary.json")) for p in folder.glob("*.summary.json")),
        key=lambda x: x[0].get("t_start", 0.0),
    )
    label = str(folder.relative_to(ROOT))
    runs = []
    for side, point in sides:
        text = _text(folder / f"{point}.jsonl")
        if not text or not side.get("shape"):
            continue
        records = [to_record(json.loads(line)) for line in text.splitlines() if line.strip()]
        before, after = (_text(folder / f"{point}.metrics.{w}.prom") for w in ("before", "after"))
        split = engine_time(parse(before), parse(after), records) if before and after else None
        run = run_of(
            records, side, deployment, f"{label}/{point}", folder / point, launch=label, one_chunk_per_token=False
        )
        runs.append(replace(run, scored=point != "warmup", engine_time=split))
    return runs


def launches(split: dict[str, Any], family: str) -> tuple[dict[Path, list[int]], dict[Path, list[int]]]:
    """(fit launches, held-out launches) of a family: folder → setting."""
    fit = {ROOT / path: setting for path, setting in split["fit_data"].get(family, {}).items()}
    held: dict[Path, list[int]] = {}
    for manifest in sorted(PARTS_DATA.glob("*/manifest.json")):
        for s in json.loads(manifest.read_text())["plan"]["startups"]:
            folder = manifest.parent / s["id"]
            if s.get("family") == family and folder.is_dir():
                (fit if s["role"] == "fit" else held)[folder] = s["setting"]
    bad = [str(f) for f, s in fit.items() if s in split["settings"]["held_out"]]
    if bad:
        raise SystemExit(f"fit launches at a held-out setting: {bad} — the split forbids it (split.json)")
    return fit, held


def figures(run: MeasuredRun, sim_records: list, sim_split: Any) -> dict[str, Any]:
    real, sim = measured_summary(run), summarize(trusted(sim_records, run.untimed))
    real_parts, sim_parts = part_targets(run.engine_time), part_targets(sim_split)
    out: dict[str, Any] = {}
    for key, side_real, side_sim in (
        ("ttft_p50_ms", real.ttft_ms.p50, sim.ttft_ms.p50),
        ("tpot_p50_ms", real.tpot_ms.p50, sim.tpot_ms.p50),
        ("output_tok_s", real.output_throughput, sim.output_throughput),
        ("prefill_ms", real_parts.get("prefill_ms"), sim_parts.get("prefill_ms")),
        ("wait_ms", real_parts.get("wait_ms"), sim_parts.get("wait_ms")),
    ):
        out[f"{key}_real"], out[f"{key}_sim"] = side_real, side_sim
    return out


def score(runs: list[MeasuredRun], coef: StepCoefficients, role: str) -> list[dict[str, Any]]:
    replayed = replay_all(runs, coef, intervals_only=True)
    rows = []
    for run in runs:
        if not run.scored:
            continue
        launch, point = run.name.rsplit("/", 1)
        got = replayed[run.name]
        rows.append({"role": role, "launch": launch, "point": point, **figures(run, got.records, got.engine_time)})
    return rows


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| figure | points | within 10% | within 20% | mean abs error | max abs error |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, title in FIGURES:
        errs = [e for r in rows if (e := err(r[f"{key}_sim"], r[f"{key}_real"])) is not None]
        if errs:
            lines.append(
                f"| {title} | {len(errs)} | {sum(abs(e) <= 0.1 for e in errs)} | {sum(abs(e) <= 0.2 for e in errs)} | "
                f"{100 * statistics.fmean(abs(e) for e in errs):.1f}% | {100 * max(abs(e) for e in errs):.1f}% |"
            )
    return lines


def held_out_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each held-out point: the error of its repeats' means beside their spread."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["launch"], r["point"].rsplit("_r", 1)[0]), []).append(r)
    head = "| launch | point | n | " + " | ".join(f"{t} err (spread)" for _, t in FIGURES) + " |"
    lines = [head, "|---|---|---:|" + "---:|" * len(FIGURES)]
    for (launch, point), mine in groups.items():
        cells = []
        for key, _ in FIGURES:
            real = [r[f"{key}_real"] for r in mine if r[f"{key}_real"] is not None]
            sim = [r[f"{key}_sim"] for r in mine if r[f"{key}_sim"] is not None]
            e = err(statistics.fmean(sim), statistics.fmean(real)) if real and sim else None
            s = spread(real)
            cells.append(("-" if e is None else f"{100 * e:+.0f}%") + ("" if s is None else f" ({100 * s:.0f}%)"))
        lines.append(f"| {launch.rsplit('/', 1)[-1]} | {point} | {len(mine)} | " + " | ".join(cells) + " |")
    return lines


def fit_family(split: dict[str, Any], family: str, samples: int, iters: int) -> tuple[list[str], list[dict]]:
    model = split["families"][family]["model"]
    fit, held = launches(split, family)
    lines = [f"## {family} ({model})", ""]
    if not fit:
        return [*lines, "No fit data yet (the plan measures it: README, 'The per-part fit').", ""], []
    excluded = split.get("fit_excluded", {})
    fit_runs = [replace(r, scored=r.scored and r.name not in excluded) for f in fit for r in launch_runs(f, model)]
    held_runs = [r for folder in held for r in launch_runs(folder, model)]
    start_file = START / f"h200_{model}_vllm0.24.0.json"
    start = CalibrationProfile.load(start_file).coefficients if start_file.exists() else None
    t0 = time.perf_counter()
    coef, fit_errors = fit_coefficients(fit_runs, start=start, samples=samples, iters=iters, by_part=True)
    took = time.perf_counter() - t0
    PROFILES.mkdir(exist_ok=True)
    CalibrationProfile(
        gpu="H200", model=model, engine="vllm", engine_version="0.24.0", tensor_parallel_size=1, coefficients=coef,
        fitted_on=sorted({r.name for r in fit_runs if r.scored}), fit_errors=fit_errors,
        created=time.strftime("%Y-%m-%d"),
    ).save(PROFILES / f"h200_{model}_parts.json")  # fmt: skip
    rows = score(fit_runs, coef, "fit") + score(held_runs, coef, "held_out")
    fit_rows = [r for r in rows if r["role"] == "fit"]
    held_rows = [r for r in rows if r["role"] == "held_out"]
    mine = tuple(str(f.relative_to(ROOT)) for f in fit)
    lines += [
        *(f"Left out of the fit: {name} ({why}). " for name, why in excluded.items() if name.startswith(mine)),
        f"Fit on {len(fit)} launches ({sum(r.scored for r in fit_runs)} points; settings "
        f"{sorted({tuple(s) for s in fit.values()})}) in {took:.0f} s ({samples} starts, {iters} iterations), "
        f"from {start_file.relative_to(ROOT) if start else 'the defaults'}; profile "
        f"`profiles/h200_{model}_parts.json`.",
        "",
        "Coefficients: " + ", ".join(f"{k} {v:.4g}" for k, v in _flat(coef).items()),
        "",
        "Fit points (what the fit saw):",
        "",
        *summary_lines(fit_rows),
        "",
    ]
    if held_rows:
        lines += ["Held out (never fitted on):", "", *summary_lines(held_rows), "", *held_out_lines(held_rows), ""]
    else:
        lines += ["Held out: nothing measured yet (`plan_next.json` measures it).", ""]
    return lines, rows


def _flat(coef: StepCoefficients) -> dict[str, float]:
    eff = coef.efficiency
    out = {"bandwidth": eff.bandwidth, "mfu_prefill": eff.mfu_prefill, "mfu_decode": eff.mfu_decode}
    out.update(step_overhead_s=eff.step_overhead_s, per_seq_overhead_s=coef.per_seq_overhead_s)
    out.update(
        request_overhead_s=coef.request_overhead_s, request_token_s=coef.request_token_s, cpu_step_s=coef.cpu_step_s
    )
    out["cpu_prefill_step_s"] = coef.cpu_prefill_step_s or 0.0
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", action="append", help="only these families (default: all in split.json)")
    p.add_argument("--samples", type=int, default=48, help="the fit's random starts (calibration's default 48)")
    p.add_argument("--iters", type=int, default=300, help="the fit's Nelder-Mead iterations (default 300)")
    a = p.parse_args()
    split = json.loads(SPLIT.read_text())
    md = [
        "# The per-part fit, per family: fit set only, scored on the held-out settings",
        "",
        f"Written by `.venv/bin/python -m benchmarks.ttft_parts.fit_parts {' '.join(sys.argv[1:])}`. "
        "Figures per point: TTFT p50, TPOT p50, output tok/s of the measured requests; vLLM's prefill part and the "
        "wait before it (queue + API server), means over every request of the point. Errors are (simulated − "
        "measured) / measured.",
        "",
    ]
    rows: list[dict[str, Any]] = []
    for family in a.family or list(split["families"]):
        lines, got = fit_family(split, family, a.samples, a.iters)
        md += lines
        rows += [{"family": family, **r} for r in got]
    (HERE / "FIT_PARTS.md").write_text("\n".join(md))
    if rows:
        keys = list(rows[0])
        with (HERE / "fit_parts.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in rows)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
