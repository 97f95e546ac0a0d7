"""The 2026-12 device campaign: which servers start (in which order), which load points each measures, and the
fit / held-out split, all fixed here before the device run (issue 11, item 1 and item 4's H200 grid).

    python campaign.py plan --models-root /root/models --out plan.json     # what driver.py runs
    python campaign.py predict --out predictions/                          # the planner's predictions
    python campaign.py split --out split.json                              # the split, one file

Startups in launch order. Every model's first startup is a cold start (torch.compile, Triton JIT); a later
startup of the same model reuses the on-disk caches (vLLM's compile cache only when the config hash is equal;
max_num_batched_tokens, max_model_len, the KV dtype and the CUDA-graph sizes all change that hash, so most
later startups are "lukewarm": inductor/Triton caches hit, vLLM's graph is re-traced).

Priorities (the driver runs an item only if it and every later item of a higher priority still fit before
the deadline): 1 = must (4 shapes, the 4-variant grid), 2 = should, 3 = if time is left.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # launch.sh runs it as a script on the device, beside driver.py: points.py by path

from points import GRID_PROBE, POINTS  # noqa: E402

HYBRID_FLAGS = ["--language-model-only", "--additional-config", '{"gdn_prefill_backend":"triton"}']

MODELS: dict[str, dict] = {
    # name: bundled config (src/servetune/model/configs/<name>), family, speed factor vs the 27B shape,
    # expected cold start s, expected later start s
    "qwen3.6-27b": {"family": "hybrid", "speed": 1.0, "cold_s": 240, "later_s": 120, "flags": HYBRID_FLAGS},
    "qwen3-32b": {"family": "dense", "speed": 1.25, "cold_s": 160, "later_s": 95, "flags": []},
    "qwen3-30b-a3b": {"family": "moe", "speed": 0.45, "cold_s": 180, "later_s": 100, "flags": []},
    "qwen3.6-35b-a3b": {"family": "hybrid_moe", "speed": 0.55, "cold_s": 240, "later_s": 120, "flags": HYBRID_FLAGS},
}

CTX = ["--max-model-len", "32768"]

# Points of a model's first startup: (point, priority, sim role). The simulator is fitted on one-stream decode,
# the 16k prefill, the closed-loop grid-probe curve and the 32-request burst of each family's first startup;
# the 128-request burst, the mixed long-prefill load, shared prefixes and Poisson arrivals are held out there too.
FIRST_POINTS = [
    ("warmup", 1, "warmup"),
    ("G_c8", 1, "fit"),
    ("G_c32", 1, "fit"),
    ("G_c64", 1, "fit"),
    ("decode_c1", 1, "fit"),
    ("prefill_16k", 1, "fit"),
    ("burst_c128", 1, "held_out"),
    ("mixed_long_c16", 2, "held_out"),
    ("poisson_hi", 2, "held_out"),
    ("prefix_c16", 2, "held_out"),
    ("burst_c32", 3, "fit"),
    ("poisson_lo", 3, "held_out"),
]
# The main model's first startup measures every load shape at must priority.
MAIN_POINTS = [(n, 1 if n not in ("burst_c32", "poisson_lo") else 2, role) for n, _, role in FIRST_POINTS]
# A grid variant (same model, other scheduler settings): the grid probe, then the stressors. All held out.
VARIANT_POINTS = [
    ("warmup", 1, "warmup"),
    ("G_c8", 1, "held_out"),
    ("G_c32", 1, "held_out"),
    ("G_c64", 1, "held_out"),
    ("burst_c128", 2, "held_out"),
    ("mixed_long_c16", 2, "held_out"),
]


def startup(sid, model, flags, *, priority, planner_role, points, grid=False, note="", stop_after="ready"):
    return {
        "id": sid,
        "model": model,
        "family": MODELS[model]["family"],
        "flags": CTX + list(flags) + MODELS[model]["flags"]
        if "--max-model-len" not in flags
        else list(flags) + MODELS[model]["flags"],
        "priority": priority,
        "planner_role": planner_role,
        "grid_variant": grid,
        "note": note,
        "stop_after": stop_after,
        "points": [{"name": p, "priority": max(priority, pr), "sim_role": role} for p, pr, role in points],
    }


STARTUPS = [
    # --- the four shapes, defaults at 32K context (cold starts) ---------------------------------------------
    startup(
        "H1",
        "qwen3.6-27b",
        [],
        priority=1,
        planner_role="fit",
        points=MAIN_POINTS,
        grid=True,
        note="hybrid GDN, defaults (max_num_batched_tokens 8192, max_num_seqs 1024); grid variant 1",
    ),
    startup("D1", "qwen3-32b", [], priority=1, planner_role="fit", points=FIRST_POINTS, note="dense, defaults"),
    startup("M1", "qwen3-30b-a3b", [], priority=1, planner_role="fit", points=FIRST_POINTS, note="MoE, defaults"),
    startup(
        "X1", "qwen3.6-35b-a3b", [], priority=1, planner_role="fit", points=FIRST_POINTS, note="hybrid MoE, defaults"
    ),
    # --- the Qwen3.6-27B grid (item 4): scheduler settings, each with the grid probe ------------------------
    startup(
        "H2",
        "qwen3.6-27b",
        ["--max-num-batched-tokens", "2048"],
        priority=1,
        planner_role="held_out",
        points=VARIANT_POINTS,
        grid=True,
        note="grid variant 2: small token budget",
    ),
    startup(
        "H3",
        "qwen3.6-27b",
        ["--max-num-batched-tokens", "16384"],
        priority=1,
        planner_role="held_out",
        points=VARIANT_POINTS,
        grid=True,
        note="grid variant 3: large token budget",
    ),
    startup(
        "H4",
        "qwen3.6-27b",
        ["--kv-cache-dtype", "fp8"],
        priority=1,
        planner_role="held_out",
        points=VARIANT_POINTS,
        grid=True,
        note="grid variant 4: FP8 KV cache",
    ),
    # --- second startups of the other families (planner held-out), then a fifth grid variant ----------------
    startup(
        "D2",
        "qwen3-32b",
        ["--max-model-len", "16384", "--max-num-batched-tokens", "2048", "--max-num-seqs", "128"],
        priority=2,
        planner_role="held_out",
        points=[],
        stop_after="kv",
        note="dense: shorter context, small token budget, 128 sequences",
    ),
    startup(
        "X2",
        "qwen3.6-35b-a3b",
        ["--max-model-len", "65536", "--max-num-seqs", "256"],
        priority=2,
        planner_role="held_out",
        points=[],
        stop_after="kv",
        note="hybrid MoE: 64K context, 256 sequences",
    ),
    startup(
        "M2",
        "qwen3-30b-a3b",
        ["--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "16384"],
        priority=3,
        planner_role="held_out",
        points=[],
        stop_after="kv",
        note="MoE: FP8 KV, large token budget",
    ),
    startup(
        "H5",
        "qwen3.6-27b",
        ["--max-num-seqs", "64"],
        priority=3,
        planner_role="held_out",
        points=VARIANT_POINTS,
        grid=True,
        note="grid variant 5: 64 sequences",
    ),
]


def with_costs(s: dict, seen: set[str]) -> dict:
    m = MODELS[s["model"]]
    cold = s["model"] not in seen
    seen.add(s["model"])
    est = m["cold_s"] if cold else m["later_s"]
    if s["stop_after"] == "kv":  # stopped at vLLM's KV-cache lines: no CUDA-graph capture, no API server start
        est = round(est * 0.7)
    out = dict(s, cold=cold, est_start_s=est)
    out["points"] = [dict(p, est_s=round(POINTS[p["name"]].est_s * m["speed"] + 2, 1)) for p in s["points"]]
    return out


def plan(models_root: str) -> dict:
    seen: set[str] = set()
    startups = [with_costs(s, seen) for s in STARTUPS]
    for s in startups:
        s["model_dir"] = f"{models_root}/{s['model']}"
    return {
        "campaign": "device_campaign_2026-12",
        "points": {k: v.as_dict() for k, v in POINTS.items()},
        "grid_probe": list(GRID_PROBE),
        "startups": startups,
    }


def split() -> dict:
    out: dict = {"planner": {"fit": [], "held_out": []}, "simulator": {"fit": [], "held_out": []}, "grid": []}
    for s in STARTUPS:
        out["planner"][s["planner_role"]].append(s["id"])
        if s["grid_variant"]:
            out["grid"].append(s["id"])
        for p in s["points"]:
            if p["sim_role"] in ("fit", "held_out"):
                out["simulator"][p["sim_role"]].append(f"{s['id']}/{p['name']}")
    return out


def servetune_plan_argv(s: dict) -> list[str]:
    model = str(HERE / "models" / s["model"] / "config.json")
    return ["plan", "--model", model, "--gpu", "H200", "--vllm-version", "0.24.0", *s["flags"], "--json"]


def predict(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for s in STARTUPS:
        argv = servetune_plan_argv(s)
        res = subprocess.run([sys.executable, "-m", "servetune", *argv], capture_output=True, text=True, check=True)
        data = json.loads(res.stdout)
        data["_command"] = "servetune " + " ".join(a if " " not in a and "{" not in a else f"'{a}'" for a in argv)
        (out / f"plan_{s['id']}.json").write_text(json.dumps(data, indent=1) + "\n")
        print(
            s["id"], data["kv_cache_tokens"], f"{data['available_kv_bytes'] / 2**30:.2f} GiB", data["max_concurrency"]
        )


def predict_sim(out: Path) -> None:
    """What the current simulator (`servetune estimate`, default coefficients) says of every fixed point before
    the run: the point's nominal workload and shape (warm-up not simulated; Poisson points, whose rate is set on
    the device, are left out)."""
    import asyncio

    from points import build

    from servetune.sim.backend import SimBackend
    from servetune.sim.fitting import deployment_for

    out.mkdir(parents=True, exist_ok=True)
    for s in STARTUPS:
        dep = deployment_for(HERE / "models" / s["model"] / "config.json", "H200", "0.24.0", s["flags"])
        res = {}
        for p in s["points"]:
            point = POINTS[p["name"]]
            if point.kind == "poisson" or p["name"] == "warmup":
                continue
            workload, shape = build(point)
            est = asyncio.run(SimBackend(dep).run(workload, shape)).summary  # the same Backend as a live server
            res[p["name"]] = {
                "ttft_ms": est.ttft_ms.model_dump(),
                "tpot_ms": est.tpot_ms.model_dump(),
                "output_throughput": est.output_throughput,
                "request_throughput": est.request_throughput,
                "duration_s": est.duration_s,
                "kv_cache_tokens": dep.kv_cache_tokens,
            }
        (out / f"sim_{s['id']}.json").write_text(json.dumps(res, indent=1) + "\n")
        print(s["id"], {k: round(v["ttft_ms"]["p50"], 1) for k, v in res.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["plan", "predict", "predict-sim", "split"])
    ap.add_argument("--models-root", default="/root/models")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.what == "plan":
        Path(a.out).write_text(json.dumps(plan(a.models_root), indent=1) + "\n")
    elif a.what == "split":
        Path(a.out).write_text(json.dumps(split(), indent=1) + "\n")
    elif a.what == "predict-sim":
        predict_sim(Path(a.out))
    else:
        predict(Path(a.out))


if __name__ == "__main__":
    main()
