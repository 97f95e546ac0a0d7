"""Held-out check of the simulator's TTFT, part by part, on the H200 tuning-table cells of the Qwen3.6-27B hybrid.

    .venv/bin/python -m benchmarks.ttft_parts.table_check          # writes TABLE_CHECK.md and table_check.csv

Every cell is one launch of real vLLM 0.24.0 on one H200 (`benchmarks/tuning_table`: Qwen3.6-27B shape, dummy
weights) that ran a warm-up and three probes three times each (`a_tput` closed loop of 128 streams, `b_goodput`
Poisson 10 req/s, `c_tpot` Poisson 4 req/s), keeping every request's record and vLLM's `/metrics` before and
after each repeat. Each cell is read as a bench folder and put through `servetune estimate --compare`'s own code
(`servetune.sim.compare.compare`: one simulated server per launch, the repeats replayed in the order they ran
with their own request lengths and arrivals, both sides summarised by `metrics.summary` and split by
`metrics.engine_time` — the split `servetune bench` keeps), with the calibration profile of the 2026-12 device
campaign (`../device_campaign/profiles/h200_qwen3.6-27b_vllm0.24.0.json`, fitted on five points of another launch,
H1, on another day: none of these cells) and with the uncalibrated defaults.

Every launch is read where `benchmarks/tuning_table` files it (`data/<variant>/`, a relaunch's in
`launch_<n>/`): the one owner of the table's measurements.

Errors are (simulated − measured) / measured. The run-to-run spread of a figure is (max − min) / mean of its three
measured repeats; a probe's error is that of the repeats' means, and an error inside the spread is a tie with the
noise, not a fit.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from servetune.metrics.engine_time import engine_time
from servetune.metrics.prometheus import parse
from servetune.metrics.record import RequestRecord
from servetune.metrics.runs import BenchRun, RunSource
from servetune.sim.calibration import MeasuredRun
from servetune.sim.compare import PointComparison, compare
from servetune.sim.fitting import deployment_for
from servetune.sim.results import run_of, to_record

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONFIG = ROOT / "src/servetune/model/configs/qwen3.6-27b/config.json"
PROFILE = ROOT / "benchmarks/device_campaign/profiles/h200_qwen3.6-27b_vllm0.24.0.json"
TABLE = ROOT / "benchmarks/tuning_table/data"
CELLS = {
    "auto-256": TABLE / "kv-auto_mnbt-8192_mns-256",
    "auto-64": TABLE / "kv-auto_mnbt-8192_mns-64",
    "fp8-64": TABLE / "kv-fp8_mnbt-8192_mns-64",
    "fp8-256 #1": TABLE / "kv-fp8_mnbt-8192_mns-256",
    "fp8-256 #2": TABLE / "kv-fp8_mnbt-8192_mns-256/launch_2",
}
"""Each launch (kv-cache dtype, max-num-seqs; max-num-batched-tokens 8192 everywhere) and its folder."""
PROBES = ("a_tput", "b_goodput", "c_tpot")
REPEATS = (1, 2, 3)
ORDER = ("warmup", *(f"{p}_r{k}" for k in REPEATS for p in PROBES))
"""The order every launch ran its probes in (`benchmarks/tuning_table/README.md`)."""
FIGURES = (
    ("ttft_p50_ms", "TTFT p50"),
    ("ttft_p99_ms", "TTFT p99"),
    ("tpot_p50_ms", "TPOT p50"),
    ("output_tok_s", "out tok/s"),
)
PARTS = (
    ("ttft_mean_ms", "TTFT mean"),
    ("queue_ms", "queue"),
    ("prefill_ms", "prefill"),
    ("rest_ms", "rest (API + HTTP)"),
)
"""vLLM's split of the client's mean TTFT: queue + prefill + the rest (the API server's part and HTTP)."""
VERSIONS = ("calibrated", "default")
PROBE_TEXT = {
    "a_tput": "closed loop, 128 streams, 64 warm-up + 128 × 512/128",
    "b_goodput": "Poisson 10 req/s, 96 × 512±25% / 128±25%",
    "c_tpot": "Poisson 4 req/s, 32 × 512/128",
}


def _text(path: Path) -> str:
    """A file as text, gzipped or not (`x` or `x.gz`)."""
    gz = path.with_name(path.name + ".gz")
    if gz.exists():
        return gzip.decompress(gz.read_bytes()).decode()
    return path.read_text()


def _records(folder: Path, probe: str) -> list[RequestRecord]:
    text = _text(folder / f"{probe}.jsonl")
    return [to_record(json.loads(line)) for line in text.splitlines() if line.strip()]


def pairs_of(folder: Path, calibrated: bool) -> list[tuple[BenchRun, MeasuredRun]]:
    """A cell's probes as (bench run with vLLM's split, measured run on the simulated deployment of its flags)."""
    variant = json.loads((folder / "variant.json").read_text())
    flags = list(variant["flags"]) + (["--calibration", str(PROFILE)] if calibrated else [])
    deployment = deployment_for(CONFIG, "H200", "0.24.0", flags)
    out = []
    for probe in ORDER:
        side = json.loads((folder / f"{probe}.summary.json").read_text())
        records = _records(folder, probe)
        split = engine_time(
            parse(_text(folder / f"{probe}.metrics.before.prom")),
            parse(_text(folder / f"{probe}.metrics.after.prom")),
            records,
        )
        shape = side["shape"]
        source = RunSource(
            tool="servetune", path=str(folder / probe), label=probe, kind=shape["kind"],
            level=shape.get("concurrency") or shape.get("rate"),
        )  # fmt: skip
        bench = BenchRun(source=source, figures={}, records=records, settings=side, engine_time=split)
        run = run_of(records, side, deployment, probe, folder / probe, launch=str(folder), one_chunk_per_token=False)
        out.append((bench, replace(run, scored=probe != "warmup")))
    return out


def _values(p: PointComparison) -> dict[str, dict[str, float | None]]:
    """A point's figures and parts on each side, the rest (API + HTTP) added."""
    out = {}
    for side, got in (("real", p.measured), ("sim", p.simulated)):
        values = dict(got)
        api, http = got.get("api_ms"), got.get("http_ms")
        values["rest_ms"] = (api or 0.0) + (http or 0.0) if api is not None else None
        out[side] = values
    return out


def check(calibrated: bool) -> tuple[list[dict[str, Any]], float]:
    """Every probe repeat of every cell, measured and simulated (one row each); and the seconds it took."""
    rows = []
    t0 = time.perf_counter()
    for cell, folder in CELLS.items():
        points = compare(pairs_of(folder, calibrated), explain="")
        for p in points:
            label = p.name.split(" ")[0]  # bench's name: the label, then the level
            if label == "warmup":
                continue
            probe, repeat = label.rsplit("_r", 1)
            values = _values(p)
            row: dict[str, Any] = {"cell": cell, "probe": probe, "repeat": int(repeat)}
            for key, _ in (*FIGURES, *PARTS, ("api_ms", ""), ("http_ms", "")):
                row[f"{key}_real"], row[f"{key}_sim"] = values["real"].get(key), values["sim"].get(key)
            if p.explain is not None:
                row["sim_mixed_ms"] = p.explain.mixed_ms
                row["sim_prefill_only_ms"] = p.explain.prefill_ms
                row["sim_mixed_steps"] = p.explain.mixed_steps
                row["sim_mixed_decodes"] = p.explain.mixed_decodes
            split = p.measured_time
            row["real_tokens_per_iteration"] = split.tokens_per_iteration if split else None
            row["real_requests_split"] = split.ttft.requests if split and split.ttft else None
            rows.append(row)
    return rows, time.perf_counter() - t0


def err(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or not real or math.isnan(sim) or math.isnan(real):
        return None
    return (sim - real) / real


def spread(values: list[float]) -> float | None:
    """(max − min) / mean of the repeats (none for a part under 1 ms: vLLM's queue at light load is 0.0-0.1 ms)."""
    mean = statistics.fmean(values) if values else 0.0
    return (max(values) - min(values)) / mean if len(values) > 1 and mean >= 1.0 else None


def probes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per cell and probe: each figure's repeats' means, the measured spread and the error of the means."""
    out = []
    for cell in CELLS:
        for probe in PROBES:
            mine = [r for r in rows if r["cell"] == cell and r["probe"] == probe]
            agg: dict[str, Any] = {"cell": cell, "probe": probe, "repeats": len(mine)}
            for key, _ in (*FIGURES, *PARTS):
                real = [r[f"{key}_real"] for r in mine if r[f"{key}_real"] is not None]
                sim = [r[f"{key}_sim"] for r in mine if r[f"{key}_sim"] is not None]
                agg[f"{key}_real"] = statistics.fmean(real) if real else None
                agg[f"{key}_sim"] = statistics.fmean(sim) if sim else None
                agg[f"{key}_spread"] = spread(real)
                agg[f"{key}_err"] = err(agg[f"{key}_sim"], agg[f"{key}_real"])
            mixed = [r["sim_mixed_ms"] for r in mine if r.get("sim_mixed_ms") is not None]
            agg["sim_mixed_ms"] = statistics.fmean(mixed) if mixed else None
            out.append(agg)
    return out


def verdict(e: float | None, s: float | None) -> str:
    if e is None:
        return "-"
    if abs(e) <= 0.10:
        return "≤10%"
    if s is not None and abs(e) <= s:
        return "in spread"
    return "≤20%" if abs(e) <= 0.20 else "MISS"


def _ms(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:+.0f}%"


def _sp(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def summary_table(aggs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| figure | probes | within 10% | within 20% | inside the spread | mean abs error | max abs error | "
        "median spread |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, title in FIGURES:
        errs = [a[f"{key}_err"] for a in aggs if a[f"{key}_err"] is not None]
        spreads = [a[f"{key}_spread"] for a in aggs if a[f"{key}_spread"] is not None]
        inside = sum(
            1 for a in aggs if a[f"{key}_err"] is not None and abs(a[f"{key}_err"]) <= (a[f"{key}_spread"] or 0)
        )
        n = len(errs)
        lines.append(
            f"| {title} | {n} | {sum(abs(e) <= 0.1 for e in errs)}/{n} | {sum(abs(e) <= 0.2 for e in errs)}/{n} | "
            f"{inside}/{n} | {100 * statistics.fmean(abs(e) for e in errs):.1f}% | "
            f"{100 * max(abs(e) for e in errs):.1f}% | {_sp(statistics.median(spreads))} |"
        )
    return lines


def figures_table(aggs: list[dict[str, Any]]) -> list[str]:
    head = "| cell | probe | " + " | ".join(f"{t} real (spread) / sim | err" for _, t in FIGURES) + " |"
    lines = [head, "|---|---|" + "---|---:|" * len(FIGURES)]
    for a in aggs:
        cells = []
        for key, _ in FIGURES:
            digits = 1 if key == "tpot_p50_ms" else 0
            cells.append(
                f"{_ms(a[f'{key}_real'], digits)} ({_sp(a[f'{key}_spread'])}) / {_ms(a[f'{key}_sim'], digits)} | "
                f"{_pct(a[f'{key}_err'])} {verdict(a[f'{key}_err'], a[f'{key}_spread'])}"
            )
        lines.append(f"| {a['cell']} | {a['probe']} | " + " | ".join(cells) + " |")
    return lines


def parts_table(aggs: list[dict[str, Any]]) -> list[str]:
    head = "| cell | probe | " + " | ".join(f"{t} real (spread) / sim | err" for _, t in PARTS)
    lines = [head + " | sim: in mixed steps |", "|---|---|" + "---|---:|" * len(PARTS) + "---:|"]
    for a in aggs:
        cells = []
        for key, _ in PARTS:
            real, sim, e = a[f"{key}_real"], a[f"{key}_sim"], a[f"{key}_err"]
            shown = _pct(e) if real is not None and real >= 1.0 else f"{sim - real:+,.0f} ms" if sim and real else "-"
            cells.append(f"{_ms(real)} ({_sp(a[f'{key}_spread'])}) / {_ms(sim)} | {shown}")
        lines.append(f"| {a['cell']} | {a['probe']} | " + " | ".join(cells) + f" | {_ms(a['sim_mixed_ms'])} |")
    return lines


def by_probe_kind(aggs: list[dict[str, Any]]) -> list[str]:
    """Each part's miss per probe kind over the five cells: mean of (sim − real) in ms and in % of the measured
    mean TTFT, so the parts' misses add up to the TTFT's."""
    lines = [
        "| probe | TTFT mean real / sim | queue Δ | prefill Δ | rest Δ | TTFT mean Δ |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for probe in PROBES:
        mine = [a for a in aggs if a["probe"] == probe]
        real = statistics.fmean(a["ttft_mean_ms_real"] for a in mine)
        sim = statistics.fmean(a["ttft_mean_ms_sim"] for a in mine)
        cells = []
        for key in ("queue_ms", "prefill_ms", "rest_ms", "ttft_mean_ms"):
            d = statistics.fmean(a[f"{key}_sim"] - a[f"{key}_real"] for a in mine)
            cells.append(f"{d:+,.0f} ms ({100 * d / real:+.0f}%)")
        lines.append(f"| {probe} | {real:,.0f} / {sim:,.0f} ms | " + " | ".join(cells) + " |")
    return lines


def repeats_table(rows: list[dict[str, Any]]) -> list[str]:
    cols = (*FIGURES, ("queue_ms", "queue"), ("prefill_ms", "prefill"), ("rest_ms", "rest"))
    lines = [
        "| cell | probe | r | " + " | ".join(f"{t} real / sim (err)" for _, t in cols) + " |",
        "|---|---|---:|" + "---|" * len(cols),
    ]
    for r in rows:
        cells = []
        for key, _ in cols:
            digits = 1 if key == "tpot_p50_ms" else 0
            real, sim = r[f"{key}_real"], r[f"{key}_sim"]
            e = err(sim, real) if real is not None and real >= 1.0 else None
            cells.append(f"{_ms(real, digits)} / {_ms(sim, digits)} ({_pct(e)})")
        lines.append(f"| {r['cell']} | {r['probe']} | {r['repeat']} | " + " | ".join(cells) + " |")
    return lines


def launch_spread(rows: list[dict[str, Any]]) -> list[str]:
    """The two launches of the same cell (fp8-256 #1 cold, #2 warm): launch-to-launch change of each probe's mean."""
    lines = ["| probe | " + " | ".join(t for _, t in (*FIGURES, *PARTS[1:])) + " |", "|---|" + "---:|" * 7]
    for probe in PROBES:
        cells = []
        for key, _ in (*FIGURES, *PARTS[1:]):
            one, two = (
                statistics.fmean(r[f"{key}_real"] for r in rows if r["cell"] == c and r["probe"] == probe)
                for c in ("fp8-256 #1", "fp8-256 #2")
            )
            cells.append(f"{_pct(err(two, one))}" if one >= 1.0 else f"{two - one:+.1f} ms")
        lines.append(f"| {probe} | " + " | ".join(cells) + " |")
    return lines


def cell_lines() -> list[str]:
    out = [
        "| cell | folder | --kv-cache-dtype | --max-num-seqs | ready after | compile cache |",
        "|---|---|---|---:|---:|---|",
    ]
    for cell, folder in CELLS.items():
        v = json.loads((folder / "variant.json").read_text())
        facts = v.get("startup_facts") or {}
        out.append(
            f"| {cell} | `{folder.relative_to(ROOT)}` | {v['factors']['kv-cache-dtype']} | "
            f"{v['factors']['max-num-seqs']} | {v.get('ready_s', 0):.0f} s | {facts.get('compile_cache', '-')} |"
        )
    return out


def write(results: dict[str, tuple[list[dict[str, Any]], float]], notes: str) -> None:
    cal_rows, cal_s = results["calibrated"]
    def_rows, def_s = results["default"]
    cal, dflt = probes(cal_rows), probes(def_rows)
    md = [
        "# The simulator's TTFT by part, held out: the H200 tuning-table cells of Qwen3.6-27B",
        "",
        "Written by `.venv/bin/python -m benchmarks.ttft_parts.table_check` from committed data "
        f"(simulating all five launches took {cal_s:.0f} s calibrated, {def_s:.0f} s with the defaults). "
        "See the script's docstring for how each side is read.",
        "",
        "**What was measured.** Real vLLM 0.24.0 on one H200, the Qwen3.6-27B hybrid shape (48 Gated DeltaNet + 16 "
        "attention layers, dummy weights), `--max-model-len 32768 --max-num-batched-tokens 8192 "
        "--language-model-only`, five launches (the tuning table's cells; fp8-256 twice, a cold and a warm start):",
        "",
        *cell_lines(),
        "",
        "Probes, each 3 times with its own seed: "
        + "; ".join(f"`{p}` {t}" for p, t in PROBE_TEXT.items())
        + ". 45 repeats in all.",
        "",
        "**Where the simulator's calibration came from.** `benchmarks/device_campaign/profiles/"
        "h200_qwen3.6-27b_vllm0.24.0.json`, fitted on 2026-12-01 on five points of the device campaign's launch H1 "
        "(G_c8, G_c32, G_c64, decode_c1, prefill_16k: closed loops of 1024/256-token requests, one-stream decode, "
        "a 16k prefill) — another launch, other loads, no probe of these cells. The tuning-table cells were "
        "measured afterwards (2026-12-02 and 2026-12-03) and no coefficient or model structure was fitted on them: "
        "all 45 repeats are held out. The fp8 and max-num-seqs 64 cells are also settings the profile never saw.",
        "",
        notes,
        "",
        "## Headline figures, calibrated (15 probes = 5 cells × 3 probes, each the mean of 3 repeats)",
        "",
        *summary_table(cal),
        "",
        "Uncalibrated (the planner's default coefficients), for comparison:",
        "",
        *summary_table(dflt),
        "",
        "A probe's verdict: `≤10%`; else `in spread` when its error is inside the measured run-to-run spread (a tie "
        "with the noise, not a fit); else `≤20%` or `MISS`.",
        "",
        "## Every probe, calibrated: measured mean of 3 repeats (their spread) / simulated | error",
        "",
        *figures_table(cal),
        "",
        "## TTFT by part, calibrated (mean over every request of the repeat, ms; vLLM's histograms / the simulator's)",
        "",
        "The parts add up to the client's mean TTFT: queue (vLLM: engine core queued → first scheduled) + prefill "
        "(first scheduled → first token: its prompt's steps, mixed with decodes or not) + the rest (vLLM's TTFT − "
        "queue − prefill: the API server's part, + HTTP: the client's TTFT − vLLM's; the in-process simulator has "
        "no HTTP). An error in % where the measured part is ≥ 1 ms, else the difference in ms. The last column is "
        "the part of the simulator's prefill spent in mixed steps (`--explain`).",
        "",
        *parts_table(cal),
        "",
        "## Which part misses, per probe (calibrated; mean over the 5 cells of simulated − measured)",
        "",
        *by_probe_kind(cal),
        "",
        "Uncalibrated:",
        "",
        *by_probe_kind(dflt),
        "",
        "## The same cell launched twice (fp8-256: #1 a cold start, #2 a warm restart; change of #2 against #1)",
        "",
        *launch_spread(cal_rows),
        "",
        "## Every repeat, calibrated",
        "",
        *repeats_table(cal_rows),
        "",
    ]
    (HERE / "TABLE_CHECK.md").write_text("\n".join(md))
    keys = sorted({k for r in cal_rows + def_rows for k in r}, key=lambda k: (k not in ("cell", "probe", "repeat"), k))
    with (HERE / "table_check.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["version", *keys])
        w.writeheader()
        for version, (rows, _) in results.items():
            for r in rows:
                w.writerow({"version": version, **{k: _csv(r.get(k)) for k in keys}})


def _csv(v: Any) -> Any:
    return round(v, 3) if isinstance(v, float) else v


NOTES = """**What it says (calibrated; each figure beside the spread of its 3 repeats).**

- TTFT p50 is within 10% in 3 of 15 probes, within 20% in 8, inside the run-to-run spread in 10: far from the
  issue's bar (≥ 80% within 10%). TPOT p50 is within 10% in 9/15 (max +23%), output tok/s in 15/15 (max 9.5%).
  The spreads are wide: TTFT p50's median spread is 44% (Poisson probes of 32-96 requests; the closed loop's p50
  swings between repeats, 2,091-3,095 ms in one cell, while its p99 moves 6%), so most TTFT errors here are
  ties with the noise rather than fits or misses.
- **Light load (`c_tpot`, 4 req/s): TTFT over-predicted, +20% to +50% in mean (+72 ms on 204), by the prefill
  part.** vLLM's prefill part of a 512-token prompt mixed into ~10 decodes is 107-228 ms (mean 168) where the
  simulator's is 222 (+32%, 145 ms of it in the one mixed step that carries the prompt): the fitted launch cost
  of a prompt-carrying step (`cpu_prefill_step_s` = 149 ms, fitted on 1024-token prompts and a 16k prefill of
  launch H1) is too high for these steps. The simulator's queue part (+43 ms where vLLM's is 0.0) is a
  difference of stamps, not of time: vLLM stamps a request queued when the engine core's busy loop takes it in,
  after the step it arrived in, so that wait is in vLLM's rest (19-52 ms measured, mean 36), while the
  simulator stamps it on arrival and keeps 11 ms of API time; queue + rest is 54 (sim) against 36 ms.
- **Poisson 10 req/s (`b_goodput`): +3% to +33% in mean TTFT at max-num-seqs 256 (prefill part again); +14% and
  +99% at max-num-seqs 64, by the queue part** (sim 606-623 ms against 203-461, spreads 106-211%): at 64 seats
  the queue is the wait for a finishing request, and the simulator's decode is slow there (TPOT p50 +8% and
  +23%), so seats free later.
- **Saturated closed loop (`a_tput`, 128 streams): TTFT mean −9% to −11% in every cell, by the queue part**
  (−27% to −31% at max-num-seqs 256: 969 ms against 1,272-1,507; −11% at 64), prefill −6% to −13%, and the rest
  over-predicted (+22% to +58%: the simulator's one-at-a-time API server at the fitted 11 ms a request gives 504
  ms where vLLM's API + HTTP part is 269-424). The misses partly cancel: TTFT p99 is within 4% in all five cells.
- **TPOT at max-num-seqs 64 under load is over-predicted by 14-23%** (`a_tput` +14/+15%, `b_goodput` +8/+23%),
  within ±12% at 256: a batch of 64 decodes with a prompt mixed in every step is cheaper on the device than the
  per-sequence and launch costs fitted at larger batches say.
- Launch to launch (the same fp8-256 cell, cold then warm start): TTFT p50 moved −15% to +29%, TPOT ≤ 9%,
  throughput ≤ 14% — as wide as repeat to repeat. Between the fp8 and bf16 KV-cache cells the figures differ by
  about as much as between repeats (the simulator moves them by under 5%).
- The issue's "closed-loop TTFT over-predicted by 20-40% on the hybrid" does not hold for these cells with this
  profile: at 128 streams it is under-predicted by ~10% in mean; the over-prediction is at light load (the
  prompt-step launch cost)."""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.parse_args()
    results = {version: check(version == "calibrated") for version in VERSIONS}
    write(results, NOTES)
    print(HERE / "TABLE_CHECK.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
