"""First comparison of the device campaign: the planner's predictions and the current simulator against real vLLM.

    .venv/bin/python -m benchmarks.device_campaign.compare --data benchmarks/device_campaign/data

Reads the driver's output (--data: manifest.json, <startup>/vllm.log, <startup>/<point>.jsonl|.summary.json) and
the predictions written before the run (predictions/plan_<startup>.json). Writes beside this file (or --out):

    startups.csv         per startup: vLLM's logged capacity and memory lines, start and engine times
    planner_errors.csv   the planner's predictions vs vLLM's lines (errors in %), fit / held-out as split.json says
    sim_baseline.csv     the current simulator (default coefficients, no calibration) replaying every measured
                         point's exact requests (lengths, send times or closed-loop concurrency) vs the measurement
    RESULTS.md           the tables above in words and numbers

Nothing is fitted here: this is the baseline that the modelling work (issue 11 items 2 and 3) improves on.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from pathlib import Path

from benchmarks.device_campaign.points import POINTS

HERE = Path(__file__).resolve().parent


GIB = 2**30
RX = {
    "model_loading_gib": r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s",
    "v2_runner": r"(Using V2 Model Runner)",
    "block_size": r"Setting attention block size to (\d+) tokens",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "kv_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x",
    "graph_estimate_gib": r"Estimated CUDA graph memory: ([\d.]+) GiB",
    "graph_capture": r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB",
    "graph_pool": r"CUDA graph pool memory: ([\d.]+) GiB \(actual\), ([\d.]+) GiB \(estimated\)",
    "compile_s": r"torch\.compile took ([\d.]+) s in total",
    "dynamo_s": r"Dynamo bytecode transform time: ([\d.]+) s",
    "profile_run_s": r"Initial profiling/warmup run took ([\d.]+) s",
    "init_engine_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
    "chunked": r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
    "cache_dir": r"Using cache directory: (\S+) for vLLM's torch.compile",
    "compile_cache_hit": r"(Directly load the compiled graph)",
    "non_kv_gib": r"Total non KV cache memory: ([\d.]+)GiB",
    "torch_peak_gib": r"torch peak memory increase: ([\d.]+)GiB",
    "non_torch_gib": r"non-torch forward increase memory: ([\d.]+)GiB",
    "weights_gib": r"weights memory: ([\d.]+)GiB",
    "init_free_gib": r"Initial free memory: ([\d.]+) GiB; Requested memory: ([\d.]+) \(util\), ([\d.]+) GiB",
}


def log_facts(text: str) -> dict:
    out: dict = {}
    for key, rx in RX.items():
        m = re.search(rx, text)
        if not m:
            continue
        vals = [g.replace(",", "") for g in m.groups()]
        if key == "model_loading_gib":
            out["weights_logged_gib"], out["model_loading_s"] = float(vals[0]), float(vals[1])
        elif key == "max_concurrency":
            out["concurrency_len"], out["max_concurrency"] = int(vals[0]), float(vals[1])
        elif key == "graph_capture":
            out["graph_capture_s"], out["graph_capture_gib"] = float(vals[0]), float(vals[1])
        elif key == "graph_pool":
            out["graph_pool_actual_gib"], out["graph_pool_estimated_gib"] = float(vals[0]), float(vals[1])
        elif key == "init_free_gib":
            out["init_free_gib"], out["gpu_util"], out["requested_gib"] = (float(v) for v in vals)
        elif key in ("cache_dir",):
            out[key] = vals[0]
        elif key in ("compile_cache_hit", "v2_runner"):
            out[key] = True
        else:
            out[key] = float(vals[0]) if "." in vals[0] else int(vals[0])
    return out


def pct(pred: float | None, real: float | None) -> float | None:
    if pred is None or real in (None, 0) or (isinstance(real, float) and math.isnan(real)):
        return None
    return 100.0 * (pred - real) / real


def fmt(x, nd=1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:+.{nd}f}%" if isinstance(x, float) else str(x)


# --- the planner ----------------------------------------------------------------------------------------------
def planner_rows(data: Path, manifest: dict, split: dict) -> tuple[list[dict], list[dict]]:
    facts_rows, err_rows = [], []
    for sid, rec in manifest["startups"].items():
        log = data / sid / "vllm.log"
        facts = log_facts(log.read_text(errors="replace")) if log.exists() else {}
        row = {
            "startup": sid,
            "model": rec["model"],
            "flags": " ".join(rec["flags"]),
            "cold": rec.get("cold"),
            "outcome": rec.get("outcome"),
            "ready_s": rec.get("ready_s"),
            "engine_s": rec.get("engine_s"),
            **facts,
        }
        facts_rows.append(row)
        pred_path = HERE / "predictions" / f"plan_{sid}.json"
        if not pred_path.exists() or "kv_tokens" not in facts:
            continue
        pred = json.loads(pred_path.read_text())
        role = "fit" if sid in split["planner"]["fit"] else "held_out"
        err_rows.append(
            {
                "startup": sid,
                "family": rec.get("family")
                or next(s["family"] for s in manifest["plan"]["startups"] if s["id"] == sid),
                "role": role,
                "flags": row["flags"],
                "weights_pred_gib": round(pred["weights_bytes_per_gpu"] / GIB, 2),
                "weights_vllm_gib": facts.get("weights_logged_gib"),
                "avail_kv_pred_gib": round(pred["available_kv_bytes"] / GIB, 2),
                "avail_kv_vllm_gib": facts.get("available_kv_gib"),
                "avail_kv_err_pct": pct(pred["available_kv_bytes"] / GIB, facts.get("available_kv_gib")),
                "kv_tokens_pred": pred["kv_cache_tokens"],
                "kv_tokens_vllm": facts.get("kv_tokens"),
                "kv_tokens_err_pct": pct(pred["kv_cache_tokens"], facts.get("kv_tokens")),
                "max_conc_pred": round(pred["max_concurrency"], 2),
                "max_conc_vllm": facts.get("max_concurrency"),
                "in_predicted_range": (
                    pred["available_kv_low_bytes"] / GIB
                    <= facts["available_kv_gib"]
                    <= pred["available_kv_high_bytes"] / GIB
                    if facts.get("available_kv_gib") is not None
                    else None
                ),
                "non_kv_pred_gib": round(
                    (
                        pred["weights_bytes_per_gpu"]
                        + sum(v for k, v in pred["overhead"].items() if k != "uncertainty_bytes")
                    )
                    / GIB,
                    2,
                ),
                "non_kv_vllm_gib": facts.get("non_kv_gib"),
                "cudagraph_pred_gib": round(pred["overhead"]["cudagraph_bytes"] / GIB, 2),
                "cudagraph_est_vllm_gib": facts.get("graph_estimate_gib"),
            }
        )
    return facts_rows, err_rows


# --- the simulator --------------------------------------------------------------------------------------------
def replay(jsonl: Path, model_cfg: Path, flags: list[str]) -> dict:
    """The simulator (default coefficients) on the exact requests of a measured point, read from its result
    file as `servetune calibrate` reads it (`sim.results.measured_run`, `sim.calibration.simulated_summary`)."""
    from servetune.sim.calibration import simulated_summary
    from servetune.sim.fitting import deployment_for
    from servetune.sim.results import measured_run

    dep = deployment_for(model_cfg, "H200", "0.24.0", flags)
    s = simulated_summary(measured_run(jsonl, dep))
    return {
        "ttft_ms_p50": s.ttft_ms.p50,
        "ttft_ms_p99": s.ttft_ms.p99,
        "tpot_ms_p50": s.tpot_ms.p50,
        "output_throughput": s.output_throughput,
    }


def cache_hit_rate(data: Path, sid: str, pname: str) -> float | None:
    """vLLM's prefix-cache hits / queries (tokens) over the point, from /metrics before and after (read as
    servetune reads an engine's counters: `servetune.metrics.prometheus`)."""
    from servetune.metrics.prometheus import delta, parse

    b, a = data / sid / f"{pname}.metrics.before.prom", data / sid / f"{pname}.metrics.after.prom"
    if not b.exists() or not a.exists():
        return None
    return delta(parse(b.read_text()), parse(a.read_text())).prefix_cache_hit_rate


def sim_rows(data: Path, manifest: dict, split: dict) -> list[dict]:
    from benchmarks.sim_fidelity.fidelity_records import summarize

    rows = []
    held = set(split["simulator"]["held_out"])
    plan = {s["id"]: s for s in manifest["plan"]["startups"]}
    for sid, rec in manifest["startups"].items():
        for pname, pres in rec.get("points", {}).items():
            if pres.get("outcome") != "ok" or pname == "warmup":
                continue
            jsonl = data / sid / f"{pname}.jsonl"
            summ_path = data / sid / f"{pname}.summary.json"
            if not jsonl.exists() or not summ_path.exists():
                continue
            records = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()]
            summary = json.loads(summ_path.read_text())
            real = summarize(records)
            cfg = HERE / "models" / plan[sid]["model"] / "config.json"
            try:
                sim = replay(jsonl, cfg, plan[sid]["flags"])
            except Exception as err:  # noqa: BLE001
                sim = {"error": f"{type(err).__name__}: {err}"}
            row = {
                "startup": sid,
                "point": pname,
                "role": "held_out" if f"{sid}/{pname}" in held else "fit",
                "kind": POINTS[pname].kind,
                "measured_requests": real.get("completed"),
                "rate": summary.get("rate"),
                "prefix_cache_hit_rate": cache_hit_rate(data, sid, pname),
            }
            for key in ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "output_throughput"):
                row[f"{key}_real"] = real.get(key)
                row[f"{key}_sim"] = sim.get(key)
                row[f"{key}_err_pct"] = pct(sim.get(key), real.get(key))
            if "error" in sim:
                row["sim_error"] = sim["error"]
            rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})


def stats(vals: list[float]) -> str:
    vals = [abs(v) for v in vals if v is not None and not math.isnan(v)]
    if not vals:
        return "—"
    within = sum(1 for v in vals if v <= 10)
    return f"mean |err| {sum(vals) / len(vals):.1f}%, max {max(vals):.1f}%, {within}/{len(vals)} within 10%"


def g(x, nd=2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def startups_md(facts: list[dict]) -> list[str]:
    out = ["## Startups: times and vLLM's memory lines", ""]
    out += [
        "| startup | model | start | outcome | ready s | engine s | torch.compile s | profile run s | graph capture s "
        "| runner | weights GiB | torch peak GiB | non-torch GiB | CUDA graphs est. / actual GiB | available KV GiB "
        "| KV tokens |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in facts:
        if r.get("outcome") in (None, "skipped"):
            continue
        out.append(
            f"| {r['startup']} | {r['model']} | {'cold' if r['cold'] else 'later'} | {r['outcome']} | "
            f"{g(r.get('ready_s'), 0)} | {g(r.get('engine_s'), 0)} | {g(r.get('compile_s'), 1)} | "
            f"{g(r.get('profile_run_s'), 1)} | {g(r.get('graph_capture_s'), 0)} | "
            f"{'V2' if r.get('v2_runner') else 'V1'} | {g(r.get('weights_gib'))} | {g(r.get('torch_peak_gib'))} | "
            f"{g(r.get('non_torch_gib'))} | {g(r.get('graph_estimate_gib'))} / {g(r.get('graph_capture_gib'))} | "
            f"{g(r.get('available_kv_gib'))} | {r.get('kv_tokens', '—'):,} |"
        )
    skipped = [r["startup"] for r in facts if r.get("outcome") == "skipped"]
    out += ["", f"Not run (skipped by the driver for time): {', '.join(skipped) or 'none'}.", ""]
    return out


def overhead_md(perr: list[dict], facts: list[dict]) -> list[str]:
    by = {r["startup"]: r for r in facts}
    out = ["## Where the planner's non-KV memory differs (GiB)", ""]
    out += [
        "| startup | family | non-KV pred / vLLM | non-torch pred / vLLM | activation+sampler pred / torch peak vLLM "
        "| CUDA graphs pred / vLLM estimate (subtracted) |",
        "|---|---|---|---|---|---|",
    ]
    for r in perr:
        pred = json.loads((HERE / "predictions" / f"plan_{r['startup']}.json").read_text())["overhead"]
        f = by[r["startup"]]
        act = max(pred["activation_bytes"], pred["sampler_bytes"]) / GIB
        graphs = "none (V2 runner)" if f.get("v2_runner") else g(f.get("graph_estimate_gib"))
        out.append(
            f"| {r['startup']} | {r['family']} | {r['non_kv_pred_gib']} / {g(f.get('non_kv_gib'))} | "
            f"{pred['non_torch_bytes'] / GIB:.2f} / {g(f.get('non_torch_gib'))} | {act:.2f} / "
            f"{g(f.get('torch_peak_gib'))} | {pred['cudagraph_bytes'] / GIB:.2f} / {graphs} |"
        )
    out += [""]
    return out


def grid_md(data: Path, manifest: dict) -> list[str]:
    out = ["## The Qwen3.6-27B grid (issue 11 item 4): what was measured per variant", ""]
    out += [
        "| variant | flags beyond the base | engine s (launch to stopped) | ready s | probe s (warm-up + G points) "
        "| c8 / c32 / c64 output tok/s | c8 / c32 / c64 TTFT p99 ms | c8 / c32 / c64 TPOT p99 ms |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    base = set(manifest["plan"]["startups"][0]["flags"])
    for s in manifest["plan"]["startups"]:
        if not s["grid_variant"]:
            continue
        rec = manifest["startups"].get(s["id"], {})
        if rec.get("outcome") != "ready":
            out.append(f"| {s['id']} | `{' '.join(f for f in s['flags'] if f not in base)}` | not run | | | | | |")
            continue
        sums = {}
        for p in ("G_c8", "G_c32", "G_c64"):
            path = data / s["id"] / f"{p}.summary.json"
            sums[p] = json.loads(path.read_text()) if path.exists() else {}
        probe_s = sum(rec["points"].get(p, {}).get("wall_s", 0) for p in ("warmup", "G_c8", "G_c32", "G_c64"))
        extra = " ".join(f for f in s["flags"] if f not in base) or "(defaults)"

        def row(key, sums=sums):
            return " / ".join(g(sums[p].get(key), 0) for p in ("G_c8", "G_c32", "G_c64"))

        out.append(
            f"| {s['id']} | `{extra}` | {g(rec.get('engine_s'), 0)} | {g(rec.get('ready_s'), 0)} | {probe_s:.0f} | "
            f"{row('output_throughput')} | {row('ttft_ms_p99')} | {row('tpot_ms_p99')} |"
        )
    out += [""]
    return out


def results_md(facts: list[dict], perr: list[dict], srows: list[dict], data: Path, manifest: dict) -> str:
    out = ["# Device campaign 2026-12: first comparison (baseline, nothing fitted)", ""]
    out += startups_md(facts)
    out += ["## The planner vs vLLM's startup lines", ""]
    out += [
        "| startup | family | split | flags | weights pred / vLLM GiB | available KV pred / vLLM GiB | err | "
        "KV tokens pred / vLLM | err | max conc. pred / vLLM | in range |",
        "|---|---|---|---|---|---|---:|---|---:|---|---|",
    ]
    for r in perr:
        out.append(
            f"| {r['startup']} | {r['family']} | {r['role']} | `{r['flags']}` | {r['weights_pred_gib']} / "
            f"{r['weights_vllm_gib']} | {r['avail_kv_pred_gib']} / {r['avail_kv_vllm_gib']} | "
            f"{fmt(r['avail_kv_err_pct'], 2)} | {r['kv_tokens_pred']:,} / {r['kv_tokens_vllm']:,} | "
            f"{fmt(r['kv_tokens_err_pct'], 2)} | {r['max_conc_pred']} / {r['max_conc_vllm']} | "
            f"{r['in_predicted_range']} |"
        )
    out += ["", f"KV tokens, all startups: {stats([r['kv_tokens_err_pct'] for r in perr])} (goal: 1%).", ""]
    out += overhead_md(perr, facts)
    out += grid_md(data, manifest)
    out += ["## The current simulator (default coefficients) replaying each measured point", ""]
    out += [
        "| startup | point | split | kind | n | prefix-cache hits | TTFT p50 real / sim ms | err | TTFT p99 err "
        "| TPOT p50 real / sim ms | err | out tok/s real / sim | err |",
        "|---|---|---|---|---:|---:|---|---:|---:|---|---:|---|---:|",
    ]

    def f0(x):
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"

    def cache(x):
        return "off" if x is None else f"{100 * x:.0f}%"

    for r in srows:
        out.append(
            f"| {r['startup']} | {r['point']} | {r['role']} | {r['kind']} | {r['measured_requests']} | "
            f"{cache(r['prefix_cache_hit_rate'])} | {f0(r['ttft_ms_p50_real'])} / {f0(r['ttft_ms_p50_sim'])} | "
            f"{fmt(r['ttft_ms_p50_err_pct'])} | "
            f"{fmt(r['ttft_ms_p99_err_pct'])} | {f0(r['tpot_ms_p50_real'])} / {f0(r['tpot_ms_p50_sim'])} | "
            f"{fmt(r['tpot_ms_p50_err_pct'])} | {f0(r['output_throughput_real'])} / "
            f"{f0(r['output_throughput_sim'])} | {fmt(r['output_throughput_err_pct'])} |"
        )
    groups = (
        ("held-out points", [r for r in srows if r["role"] == "held_out"]),
        (
            "held-out points without prefix-cache hits",
            [r for r in srows if r["role"] == "held_out" and not (r["prefix_cache_hit_rate"] or 0) > 0.05],
        ),
        ("fit points (not fitted yet: the default coefficients)", [r for r in srows if r["role"] == "fit"]),
    )
    for title, rows in groups:
        out += ["", f"Summary, {title} ({len(rows)}):", ""]
        for key, label in (
            ("ttft_ms_p50", "TTFT p50"),
            ("ttft_ms_p99", "TTFT p99"),
            ("tpot_ms_p50", "TPOT p50"),
            ("output_throughput", "output throughput"),
        ):
            out.append(f"- {label}: {stats([r[f'{key}_err_pct'] for r in rows])}")
    out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="the driver's output folder (manifest.json inside)")
    ap.add_argument("--out", default=str(HERE))
    a = ap.parse_args()
    data, out = Path(a.data), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((data / "manifest.json").read_text())
    split = json.loads((HERE / "split.json").read_text())
    facts, perr = planner_rows(data, manifest, split)
    srows = sim_rows(data, manifest, split)
    write_csv(out / "startups.csv", facts)
    write_csv(out / "planner_errors.csv", perr)
    write_csv(out / "sim_baseline.csv", srows)
    (out / "RESULTS.md").write_text(results_md(facts, perr, srows, data, manifest))
    print((out / "RESULTS.md").read_text())


if __name__ == "__main__":
    main()
