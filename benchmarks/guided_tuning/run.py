"""Does estimate-guided tuning find the grid's best for a fraction of its engine time? (issue 11 item 4)

    python benchmarks/guided_tuning/run.py                 # everything (the CPU parts take ~30-40 min on 2 cores)
    python benchmarks/guided_tuning/run.py --quick         # small settings, to check the pipeline (~8 min)
    python benchmarks/guided_tuning/run.py --part h200     # only the H200 part (campaign data, no engine)

One objective and one SLO for every method: the `load_curve` probe's `slo_output_tok_s` (the highest output tok/s
at a concurrency level whose requests meet `ttft_p99_ms`), at concurrency 1, 2, 4, 8 with 256-token prompts and
64-token answers (the tiny model's context is 1024). For each method: the best config it found, that config's
objective **as the grid measured it** relative to the grid's best (so run-to-run noise between the two runs does
not decide), and the engine time it spent (launch to the end of the probes, summed over its launches, from
`results.json`; calibration launches included).

- vLLM CPU, servetune's tiny model: (a) the full grid (6 variants: max-num-seqs x max-num-batched-tokens), (b) the
  same experiment with `estimate: {mode: prune, keep: 1}` after calibrating the simulator on the baseline alone
  (one launch, the probe's own load shape: `servetune calibrate` with the CPU described as a custom device).
- llama.cpp, the tiny model: (a) the full grid (slots x batch size x threads), (c) `search` over the same values
  with a trial budget of a quarter of the grid (Optuna TPE, seeded).
- H200, the device campaign's Qwen3.6-27B grid: only H1 (defaults) and H2 (max-num-batched-tokens 2048) were
  measured, so (a) is those two (their measured grid probe and engine times) and (b) is the simulator's ranking
  of all five planned variants with H1's profile (H3-H5 were not measured: their predictions cannot be checked).

Writes `RESULTS.md`, `results.json` and the experiment files (`experiments/`) beside this file; engine runs go to
`--work` (default a temporary folder). The machine this ran on is recorded; a shared machine's numbers are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

CPU_DEVICE = "custom:mem=6,bw=20,tflops=0.2"
"""The CPU as the simulator sees it (vLLM CPU's KV space is small; bandwidth and FLOP/s are nominal: the fit
scales them)."""
VLLM_VERSION = "0.32.0"
SLO_MS = 1500.0
CONCURRENCY = [1, 2, 4, 8]
LENGTHS = {"input_tokens": 256, "output_tokens": 64}

VLLM_BASE = {
    "max-model-len": 1024,
    "enforce-eager": True,
    "max-num-seqs": 2,
    "max-num-batched-tokens": 256,
    "async-scheduling": False,
}
"""vLLM's CPU platform turns async scheduling off whatever the flag says (platforms/cpu.py); saying it here makes
the simulator schedule synchronously too."""
VLLM_GRID = {"max-num-seqs": [2, 4, 8, 16], "max-num-batched-tokens": [256, 512, 1024]}
"""12 variants: prune launches the baseline and one more whatever the grid's size (plus the calibration launch),
so its share of the grid's engine time is about 3/N."""
LLAMA_BASE = {"ctx-size": 8192, "threads": 1, "metrics": True, "parallel": 1, "batch-size": 256}
LLAMA_GRID = {"parallel": [1, 2, 4, 8], "batch-size": [64, 256], "threads": [1, 2]}
"""llama.cpp splits ctx-size over the slots: 8192 leaves each of 8 slots the tiny model's 1024."""
QUICK_GRIDS = {"vllm": {"max-num-seqs": [2, 8]}, "llamacpp": {"parallel": [1, 4], "batch-size": [64, 256]}}
"""--quick: enough variants to run every step of the pipeline, not enough to judge it."""


def requests_per_point(quick: bool) -> int:
    return 8 if quick else 24


def repeats(quick: bool) -> int:
    """Repeats per probe: the ranking's means and ties need them on a machine whose load varies."""
    return 1 if quick else 3


def experiment(name: str, engine: str, base: dict, variants: dict, quick: bool, extra: dict | None = None) -> dict:
    """A `servetune tune` experiment with the shared objective, SLO and suite."""
    return {
        "name": name,
        "engine": {"engine": engine, "model": "tiny", "startup_timeout_s": 900, "flags": base},
        "client": {"endpoint": "completions", "tokenizer": "tiny"},
        "suite": {
            "repeats": repeats(quick),
            "warmup_requests": 2,
            "probes": {
                "load_curve": {
                    "concurrency": CONCURRENCY,
                    "requests_per_point": requests_per_point(quick),
                    **LENGTHS,
                    "stop_at_saturation": False,
                }
            },
        },
        "slos": {"ttft_p99_ms": SLO_MS},
        "objective": "output_throughput",
        "variants": variants,
        **(extra or {}),
    }


def tune(exp: dict, work: Path) -> dict:
    """Runs `servetune tune` on an experiment (its YAML kept in experiments/) and reads its results.json."""
    import yaml

    (HERE / "experiments").mkdir(exist_ok=True)
    path = HERE / "experiments" / f"{exp['name']}.yaml"
    path.write_text(yaml.safe_dump(exp, sort_keys=False))
    out = work / exp["name"]
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "servetune", "tune", str(path), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 and not (out / "results.json").exists():
        raise RuntimeError(f"servetune tune {path.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    data = json.loads((out / "results.json").read_text())
    data["_wall_s"] = time.monotonic() - t
    return data


OBJECTIVE = "load_curve.slo_output_tok_s"


def measured(results: dict) -> dict[str, dict[str, Any]]:
    """Per launched variant (by name): its flags, objective, engine time; estimate-only ones flagged."""
    out = {}
    for v in results["variants"]:
        fig = (v.get("figures") or {}).get(OBJECTIVE) or {}
        out[v["name"]] = {
            "flags": {k: v["config"]["flags"].get(k) for k in v["changes"]} if v["changes"] else {},
            "config": v["config"]["flags"],
            "objective": fig.get("mean"),
            "engine_s": v.get("wall_s") or 0.0,
            "status": v["status"],
            "estimated_only": v.get("estimated_only", False),
            "predicted": ((v.get("figures") or {}).get(f"estimate.{OBJECTIVE}") or {}).get("mean"),
        }
    return out


def best(variants: dict[str, dict[str, Any]]) -> str:
    done = {k: v for k, v in variants.items() if v["objective"] is not None and not v["estimated_only"]}
    return max(done, key=lambda k: done[k]["objective"])


def same_config(a: dict, b: dict, keys: list[str]) -> bool:
    return all(a.get(k) == b.get(k) for k in keys)


def compare(grid: dict, other: dict, keys: list[str], extra_engine_s: float = 0.0) -> dict[str, Any]:
    """A method's pick against the grid: the grid's measurement of the picked config, and the engine time."""
    g, o = measured(grid), measured(other)
    top = best(g)
    pick = best(o)
    in_grid = next((name for name, v in g.items() if same_config(v["config"], o[pick]["config"], keys)), None)
    value = g[in_grid]["objective"] if in_grid else None
    grid_s = sum(v["engine_s"] for v in g.values())
    spent = sum(v["engine_s"] for v in o.values() if not v["estimated_only"]) + extra_engine_s
    return {
        "grid_best": top,
        "grid_best_objective": g[top]["objective"],
        "pick": pick,
        "pick_config": {k: o[pick]["config"].get(k) for k in keys},
        "pick_objective_in_grid": value,
        "relative_to_grid_best": None if value is None else value / g[top]["objective"],
        "pick_objective_own_run": o[pick]["objective"],
        "grid_engine_s": grid_s,
        "engine_s": spent,
        "engine_share": spent / grid_s if grid_s else None,
        "launched": sum(1 for v in o.values() if not v["estimated_only"]),
        "variants": len(o),
        "grid_variants": len(g),
    }


# --------------------------------------------------------------------------------------------- vLLM CPU
def calibrate_cpu(work: Path, quick: bool) -> tuple[Path, float]:
    """One launch of the baseline, the objective's load shape measured with servetune's client, then `servetune
    calibrate`: the profile and the engine time it cost."""
    from servetune.engines.config import EngineConfig
    from servetune.engines.launch import launch
    from servetune.engines.models import resolve_model, resolve_tokenizer
    from servetune.load.backend import ClientSpec, LiveBackend
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Workload
    from servetune.metrics.export import write_jsonl
    from servetune.sim.fitting import calibrate_dirs

    cfg = resolve_model(EngineConfig(engine="vllm", model="tiny", flags=VLLM_BASE))
    launch_dir = work / "calibration" / "baseline"
    shutil.rmtree(launch_dir, ignore_errors=True)
    launch_dir.mkdir(parents=True)
    from servetune.engines.vocab import to_argv

    (launch_dir / "flags.txt").write_text("\n".join(to_argv("vllm", dict(VLLM_BASE))) + "\n")
    t = time.monotonic()
    with launch(cfg, log_dir=work / "calibration" / "logs", startup_timeout_s=900) as engine:
        backend = LiveBackend(
            engine.base_url,
            engine.model_name,
            client=ClientSpec(endpoint="completions", tokenizer=resolve_tokenizer("tiny")),
        )
        workload = Workload.synthetic(LENGTHS["input_tokens"], LENGTHS["output_tokens"], seed=11)
        n = requests_per_point(quick)
        for c in CONCURRENCY:
            shape = LoadShape.closed(c, requests=max(n, 2 * c), warmup_requests=c)
            result = asyncio.run(backend.run(workload, shape))
            write_jsonl(result.records, launch_dir / f"c{c}.jsonl")
            (launch_dir / f"c{c}.json").write_text(result.to_json())
    engine_s = time.monotonic() - t
    profile = calibrate_dirs(
        [launch_dir], model=cfg.model, gpu=CPU_DEVICE, vllm_version=VLLM_VERSION, iters=60 if quick else 200
    )
    path = HERE / "profile_vllm-cpu_tiny.json"
    profile.save(path)
    return path, engine_s


def cpu_part(work: Path, quick: bool) -> dict[str, Any]:
    vgrid = QUICK_GRIDS["vllm"] if quick else VLLM_GRID
    keys = list(vgrid)
    profile, calib_s = calibrate_cpu(work, quick)
    grid = tune(experiment("vllm-cpu-grid", "vllm", VLLM_BASE, {"grid": vgrid}, quick), work)
    estimate = {"estimate": {"mode": "prune", "keep": 1, "calibration": str(profile)}}
    pruned = tune(experiment("vllm-cpu-prune", "vllm", VLLM_BASE, {"grid": vgrid}, quick, estimate), work)
    vllm = compare(grid, pruned, keys, extra_engine_s=calib_s)
    vllm["calibration_engine_s"] = calib_s
    vllm["predicted"] = {k: v["predicted"] for k, v in measured(pruned).items()}
    vllm["grid_measured"] = {k: v["objective"] for k, v in measured(grid).items()}
    lgrid_values = QUICK_GRIDS["llamacpp"] if quick else LLAMA_GRID
    lkeys = list(lgrid_values)
    lgrid = tune(experiment("llamacpp-grid", "llamacpp", LLAMA_BASE, {"grid": lgrid_values}, quick), work)
    size = math.prod(len(v) for v in lgrid_values.values())
    space = {k: {"choice": v} for k, v in lgrid_values.items()}
    budget_min = sum(v["engine_s"] for v in measured(lgrid).values()) / 60 / 4  # a quarter of the grid's engine time
    search = {"search": {"space": space, "budget_gpu_minutes": round(budget_min, 4), "max_trials": max(2, size // 4),
                         "seed": 7}}  # fmt: skip
    lsearch = tune(experiment("llamacpp-search", "llamacpp", LLAMA_BASE, search, quick), work)
    llama = compare(lgrid, lsearch, lkeys)
    llama["grid_measured"] = {k: v["objective"] for k, v in measured(lgrid).items()}
    llama["search_measured"] = {k: v["objective"] for k, v in measured(lsearch).items()}
    settings = {
        "vllm_grid": vgrid,
        "llamacpp_grid": lgrid_values,
        "repeats": repeats(quick),
        "requests_per_point": requests_per_point(quick),
    }
    return {"vllm_cpu": vllm, "llamacpp": llama, "settings": settings}


# --------------------------------------------------------------------------------------------- H200 (campaign)
H200_VARIANTS: dict[str, dict[str, Any]] = {
    "H1": {},
    "H2": {"max-num-batched-tokens": 2048},
    "H3": {"max-num-batched-tokens": 16384},
    "H4": {"kv-cache-dtype": "fp8"},
    "H5": {"max-num-seqs": 64},
}
"""The campaign's planned grid (campaign.py): defaults and one change each (H3-H5 were not run)."""


def h200_part() -> dict[str, Any]:
    """The campaign's Qwen3.6-27B grid: measured H1/H2 against the simulator's ranking of all five variants."""
    from servetune.tune.schema.loader import parse_experiment
    from servetune.tune.search.estimates import predictor

    campaign = ROOT / "benchmarks" / "device_campaign"
    manifest = json.loads((campaign / "data" / "manifest.json").read_text())
    model = campaign / "models" / "qwen3.6-27b"
    profile = campaign / "profiles" / "h200_qwen3.6-27b_vllm0.24.0.json"
    text = json.dumps(
        {
            "name": "h200-grid",
            "engine": {"engine": "vllm", "model": str(model), "version": "0.24.0",
                       "flags": {"max-model-len": 32768, "language-model-only": True}},
            "hardware": {"gpu": "H200"},
            "suite": {"probes": {"load_curve": {"concurrency": [8, 32, 64], "requests_per_point": 16,
                                                "input_tokens": 512, "output_tokens": 128,
                                                "stop_at_saturation": False}}},
            "slos": {"ttft_p99_ms": 1000},
            "objective": "output_throughput",
            "estimate": {"mode": "prune", "keep": 1, "calibration": str(profile)},
            "variants": {"matrix": {"baseline": "H1", "changes": {k: v for k, v in H200_VARIANTS.items() if v}}},
        }
    )  # fmt: skip
    exp = parse_experiment(text)
    predict = predictor(exp)
    from servetune.engines.config import EngineConfig

    out: dict[str, Any] = {"variants": {}, "slo_ttft_p99_ms": 1000}
    for name, flags in H200_VARIANTS.items():
        cfg = EngineConfig(engine="vllm", model=str(model), flags={**exp.engine.flags, **flags}, version="0.24.0")
        p = predict(cfg)
        row: dict[str, Any] = {"flags": flags, "predicted": p.objective, "predicted_reason": p.reason}
        rec = manifest["startups"].get(name, {})
        if rec.get("outcome") == "ready":
            points = {}
            for c in (8, 32, 64):
                s = json.loads((campaign / "data" / name / f"G_c{c}.summary.json").read_text())
                points[c] = (s["output_throughput"], s["ttft_ms_p99"])
            passing = [tok for tok, p99 in points.values() if p99 <= 1000]
            row.update(
                measured=max(passing) if passing else None,
                points=points,
                engine_s=rec["engine_s"],
                ready_s=rec["ready_s"],
            )
        else:
            row["measured"] = None
            row["note"] = "not run (the campaign's driver skipped it for time)"
        out["variants"][name] = row
    return out


# --------------------------------------------------------------------------------------------- report
def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation (no ties expected in measured throughputs)."""
    if len(a) < 3:
        return None

    def ranks(xs: list[float]) -> list[int]:
        order = sorted(range(len(xs)), key=xs.__getitem__)
        out = [0] * len(xs)
        for rank, i in enumerate(order):
            out[i] = rank
        return out

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def render(res: dict[str, Any]) -> str:
    def n(x: Any, nd: int = 1) -> str:
        return "—" if x is None else f"{x:,.{nd}f}"

    def pct(x: Any) -> str:
        return "—" if x is None else f"{100 * x:.1f}%"

    m = res["machine"]
    out = ["# Estimate-guided tuning against the full grid (issue 11 item 4)", ""]
    out += [
        f"Run {res['when']} on {m['platform']}, {m['cpus']} cores (load average {m['load']} at the start), "
        f"Python {m['python']}; settings: {'quick' if res['quick'] else 'full'}. Objective: `load_curve` "
        f"`slo_output_tok_s` (highest output tok/s at a concurrency level of {CONCURRENCY} whose TTFT p99 is at "
        f"most {SLO_MS:g} ms), {LENGTHS['input_tokens']}-token prompts, {LENGTHS['output_tokens']}-token answers. "
        "A pick's objective is the grid's measurement of the same config (its own run's value beside it).",
        "",
    ]
    if "vllm_cpu" in res:
        st = res["settings"]
        out += [
            "## Summary (CPU engines, the tiny model)",
            "",
            f"Grids: vLLM CPU `{json.dumps(st['vllm_grid'])}` (base `{json.dumps(VLLM_BASE)}`), llama.cpp "
            f"`{json.dumps(st['llamacpp_grid'])}` (base `{json.dumps(LLAMA_BASE)}`); {st['repeats']} repeat(s) per "
            f"probe, {st['requests_per_point']} requests per load level.",
            "",
            "| engine | method | variants launched / declared | best config found | its objective in the grid "
            "| vs grid best | its objective in its own run | engine s | share of the grid's engine time |",
            "|---|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for engine, label, key in (("vLLM CPU", "(b) estimate: prune, keep 1", "vllm_cpu"),
                                   ("llama.cpp", "(c) search, budget ¼ of the grid", "llamacpp")):  # fmt: skip
            r = res[key]
            out.append(
                f"| {engine} | (a) full grid | {r['grid_variants']} / {r['grid_variants']} | {r['grid_best']} | "
                f"{n(r['grid_best_objective'])} | 100% | {n(r['grid_best_objective'])} | {n(r['grid_engine_s'], 0)} "
                "| 100% |"
            )
            out.append(
                f"| {engine} | {label} | {r['launched']} / {r['variants']} | {r['pick']} | "
                f"{n(r['pick_objective_in_grid'])} | {pct(r['relative_to_grid_best'])} | "
                f"{n(r['pick_objective_own_run'])} | {n(r['engine_s'], 0)} | {pct(r['engine_share'])} |"
            )
        v = res["vllm_cpu"]
        noise = []
        for key, engine in (("vllm_cpu", "vLLM CPU"), ("llamacpp", "llama.cpp")):
            r = res[key]
            own, grid = r["pick_objective_own_run"], r["pick_objective_in_grid"]
            if own and grid:
                noise.append(f"{engine}'s pick measured {own:,.0f} tok/s in its own run and {grid:,.0f} in the grid's")
        out += [
            "",
            "**Noise.** " + "; ".join(noise) + ": the same config, minutes apart. Where the two differ by more "
            "than the gaps between the grid's top configs, the grid's own ranking is not resolved and neither "
            "comparison can meet a 2% goal; only a quiet machine and repeats (the script's default: 3) can.",
            "",
            f"(b)'s engine time includes the calibration launch ({n(v['calibration_engine_s'], 0)} s: one start of the "
            "baseline and the probe's load shape measured with servetune's client).",
            "",
            "### vLLM CPU: predicted (calibrated on the baseline alone) and measured objective per variant",
            "",
            "| variant | predicted tok/s | measured in the grid tok/s |",
            "|---|---:|---:|",
        ]
        for name in v["grid_measured"]:
            out.append(f"| {name} | {n(v['predicted'].get(name))} | {n(v['grid_measured'][name])} |")
        pairs = [(v["predicted"].get(k), m) for k, m in v["grid_measured"].items()]
        rho = spearman([p for p, m in pairs if p is not None and m is not None], [m for p, m in pairs if p and m])
        out += ["", f"Rank correlation (Spearman) of predicted and measured: {n(rho, 2)}."]
        ll = res["llamacpp"]
        out += [
            "",
            "### llama.cpp: the grid's and the search's measurements",
            "",
            "| variant | grid tok/s |",
            "|---|---:|",
        ]
        for name, value in sorted(ll["grid_measured"].items(), key=lambda kv: -(kv[1] or 0)):
            out.append(f"| {name} | {n(value)} |")
        out += ["", "| search trial | its own run tok/s |", "|---|---:|"]
        for name, value in ll["search_measured"].items():
            out.append(f"| {name} | {n(value)} |")
        out.append("")
    if "h200" in res:
        h = res["h200"]
        out += [
            "## H200, Qwen3.6-27B (device campaign data): (a) the measured grid vs (b) the simulator's ranking",
            "",
            "The campaign planned five variants and measured two (H1, H2): **H3, H4 and H5 were not measured**, so "
            "(b)'s predictions for them cannot be checked and this is no test of pruning. Objective: the grid "
            f"probe's output tok/s at the highest of c8/c32/c64 whose TTFT p99 is at most {h['slo_ttft_p99_ms']} ms; "
            "predictions by `tune/search/estimates.py` with H1's calibration profile (fitted on H1's fit points).",
            "",
            "| variant | flags | predicted tok/s | measured tok/s | c8 / c32 / c64 measured tok/s (TTFT p99 ms) "
            "| engine s |",
            "|---|---|---:|---:|---|---:|",
        ]
        for name, r in h["variants"].items():
            pts = r.get("points")
            cells = " / ".join(f"{tok:.0f} ({p99:.0f})" for tok, p99 in pts.values()) if pts else r.get("note", "")
            out.append(
                f"| {name} | `{json.dumps(r['flags'])}` | {n(r['predicted'])} | {n(r['measured'])} | {cells} | "
                f"{n(r.get('engine_s'), 0)} |"
            )
        ran = {k: r for k, r in h["variants"].items() if r.get("measured") is not None}
        grid_s = sum(r["engine_s"] for r in ran.values())
        top = max(h["variants"], key=lambda k: h["variants"][k]["predicted"] or 0)
        out += [
            "",
            f"(a) cost {grid_s:.0f} engine s for the {len(ran)} measured variants; (b) with `keep: 1` launches the "
            f"baseline and its predicted best ({top}): "
            + ("the same two launches" if top in ran else "unmeasured")
            + ", so on what was measured it saves nothing; it would have skipped the three unmeasured variants, which "
            "the campaign's driver estimated at ~265 s each (README), i.e. "
            f"{grid_s:.0f} of ~{grid_s + 3 * 265:.0f} s ({grid_s / (grid_s + 3 * 265):.0%}) — an estimate, not a "
            "measurement.",
            "",
        ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("all", "cpu", "h200"), default="all")
    ap.add_argument("--quick", action="store_true", help="fewer requests per load level (a pipeline check)")
    ap.add_argument("--work", type=Path, default=None, help="where the engine runs go (default: a temp folder)")
    ap.add_argument("--render", action="store_true", help="only rewrite RESULTS.md from results.json")
    args = ap.parse_args()
    if args.render:
        (HERE / "RESULTS.md").write_text(render(json.loads((HERE / "results.json").read_text())))
        return
    os.environ.setdefault("SERVETUNE_CACHE", str(ROOT / ".servetune-cache"))
    res: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "quick": args.quick,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load": round(os.getloadavg()[0], 2),
        },
    }
    if args.part in ("all", "h200"):
        res["h200"] = h200_part()
    if args.part in ("all", "cpu"):
        with tempfile.TemporaryDirectory() as tmp:
            res.update(cpu_part(args.work or Path(tmp), args.quick))
    old = HERE / "results.json"
    if old.exists() and args.part != "all":  # keep the other part's last results
        kept = json.loads(old.read_text())
        res = {**{k: v for k, v in kept.items() if k in ("vllm_cpu", "llamacpp", "h200")}, **res}
    old.write_text(json.dumps(res, indent=2, default=str) + "\n")
    (HERE / "RESULTS.md").write_text(render(res))
    print((HERE / "RESULTS.md").read_text())


if __name__ == "__main__":
    main()
