"""Builds the tables from the measured data: `table.csv` (one row per variant x launch x probe x repeat, with the
objective figures), `variants.csv` (one row per variant: its first start as it happened, a warm start where a later
launch had one, its warm-up and vLLM's startup facts) and `table.json` (the SLOs it was scored with), the files
servetune's replay executor reads (`executor: replay`).

    PYTHONPATH=src python benchmarks/tuning_table/build_table.py [--data DIR] [--slo-a-ttft-p99 MS] ...
    ... --markdown    # also print each variant's starts and per objective mean ± sd over repeats (the README's)

A variant measured in several launches (`layout.py`: a relaunch, or a later session) has every launch's repeats in
table.csv, each row with its `launch` (1 = the first) and its `repeat` k: repeat k of every launch of every variant
was measured on the same load draw (seed k), which is what the replay pairs by.

Every figure is recomputed from the RequestRecords on disk with servetune's own summary (vLLM's definitions), so
other SLOs re-score the same measurements: (a) output tok/s of the closed-loop probe, feasible when its TTFT p99
meets `--slo-a-ttft-p99`; (b) goodput, the requests/s meeting both `--slo-b-ttft` and `--slo-b-tpot` (per request,
vLLM's `--goodput` rule); (c) TPOT p50 at the fixed Poisson rate (lower is better).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import statistics
from pathlib import Path

from servetune.metrics.record import RequestRecord
from servetune.metrics.slo import Slos
from servetune.metrics.summary import summarize

HERE = Path(__file__).resolve().parent

TABLE_COLUMNS = [
    "variant",
    "kv_cache_dtype",
    "max_num_batched_tokens",
    "max_num_seqs",
    "probe",
    "objective",
    "repeat",
    "launch",
    "outcome",
    "objective_value",
    "feasible",
    "output_tok_s",
    "request_per_s",
    "goodput_req_s",
    "good_requests",
    "completed",
    "failed",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "e2el_p50_ms",
    "duration_s",
    "wall_s",
]
VARIANT_COLUMNS = [
    "variant",
    "kv_cache_dtype",
    "max_num_batched_tokens",
    "max_num_seqs",
    "outcome",
    "complete",
    "launches",
    "starts",
    "session_started",
    "first_start_of_session",
    "ready_s",
    "warm_ready_s",
    "warmup_s",
    "engine_s",
    "probes_wall_s",
    "compile_cache",
    "cache_key",
    "dynamo_s",
    "compile_s",
    "profile_run_s",
    "graph_capture_s",
    "init_engine_s",
    "available_kv_gib",
    "kv_cache_tokens",
    "max_concurrency",
    "attention_backend",
    "block_size",
]


def read_records(path: Path) -> list[RequestRecord]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [RequestRecord.model_validate_json(line) for line in f if line.strip()]


def records_file(vdir: Path, point: str) -> Path | None:
    for name in (f"{point}.jsonl.gz", f"{point}.jsonl"):
        if (vdir / name).exists():
            return vdir / name
    return None


def r1(x: float | None) -> float | str:
    return "" if x is None else round(x, 2)


def probe_rows(vdir: Path, variant: dict, grid: dict, slos: dict, launch: int = 1) -> list[dict]:
    rows = []
    b = Slos(ttft_ms=slos["b_ttft_ms"], tpot_ms=slos["b_tpot_ms"])
    for point, res in variant["probes"].items():
        if point == "warmup":
            continue
        probe, _, rep = point.rpartition("_r")
        objective = grid["probes"][probe]["objective"]
        f = records_file(vdir, point)
        row: dict = {
            "variant": variant["id"],
            **{k.replace("-", "_"): v for k, v in variant["factors"].items()},
            "probe": probe,
            "objective": objective,
            "repeat": int(rep),
            "launch": launch,
            "outcome": res.get("outcome") if f is not None or res.get("outcome") != "ok" else "no records",
            "wall_s": res.get("wall_s", ""),
        }
        if res.get("outcome") != "ok" or f is None:
            rows.append(row | {"feasible": "", "objective_value": ""})
            continue
        s = summarize(read_records(f), slos=b if objective == "b" else None)
        row.update(
            output_tok_s=r1(s.output_throughput),
            request_per_s=r1(s.request_throughput),
            completed=s.completed,
            failed=s.failed,
            ttft_p50_ms=r1(s.ttft_ms.p(50)),
            ttft_p99_ms=r1(s.ttft_ms.p(99)),
            tpot_p50_ms=r1(s.tpot_ms.p(50)),
            tpot_p99_ms=r1(s.tpot_ms.p(99)),
            e2el_p50_ms=r1(s.e2el_ms.p(50)),
            duration_s=r1(s.duration_s),
        )
        if objective == "a":
            ttft99 = s.ttft_ms.p(99)
            row.update(objective_value=r1(s.output_throughput), feasible=ttft99 is not None and ttft99 <= slos["a"])
        elif objective == "b":
            row.update(objective_value=r1(s.goodput), goodput_req_s=r1(s.goodput), good_requests=s.good_requests)
            row["feasible"] = True
        else:
            row.update(objective_value=r1(s.tpot_ms.p(50)), feasible=s.failed == 0)
        rows.append(row)
    return rows


def cache(variant: dict) -> str:
    """A start's compile cache as vLLM's log said it (cold / warm; ? where it said nothing)."""
    return (variant.get("startup_facts") or {}).get("compile_cache") or "?"


def variant_row(launches: list[dict]) -> dict:
    """A variant's row from its launches (in launch order): the first that got ready stands for its start as it
    happened and its startup facts; `warm_ready_s` is the first later one that started with a warm compile cache
    (what a restart of the same config costs); `starts` lists every launch's."""
    ready = [v for v in launches if v.get("outcome") == "ready"]
    variant = ready[0] if ready else launches[0]
    warm = next((v for v in ready[1:] if cache(v) == "warm"), None)
    facts = variant.get("startup_facts") or {}
    ef = facts.get("engine_facts") or {}
    return {
        "variant": variant["id"],
        **{k.replace("-", "_"): v for k, v in variant["factors"].items()},
        "outcome": variant.get("outcome"),
        "complete": any(v.get("complete") for v in launches),
        "launches": len(launches),
        "starts": "; ".join(
            f"{v.get('ready_s')} {cache(v) if v.get('outcome') == 'ready' else v.get('outcome')}" for v in launches
        ),
        "warm_ready_s": None if warm is None else warm.get("ready_s"),
        "session_started": variant.get("session_started"),
        "first_start_of_session": variant.get("first_start_of_session"),
        "ready_s": variant.get("ready_s"),
        "warmup_s": (variant["probes"].get("warmup") or {}).get("wall_s"),
        "engine_s": variant.get("engine_s"),
        "probes_wall_s": round(sum(p.get("wall_s", 0) or 0 for p in variant["probes"].values()), 1),
        **{k: facts.get(k) for k in ("compile_cache", "cache_key", "dynamo_s", "compile_s", "profile_run_s")},
        "graph_capture_s": ef.get("cuda_graph_capture_s"),
        "init_engine_s": ef.get("init_engine_s"),
        **{k: ef.get(k) for k in ("available_kv_gib", "kv_cache_tokens", "max_concurrency", "attention_backend")},
        "block_size": ef.get("block_size"),
    }


def markdown(rows: list[dict], vrows: list[dict]) -> str:
    """Per variant: its starts (ready s and compile cache, each launch's), then per objective the mean over every
    repeat of every launch ± their standard deviation, with the range and the count."""
    out = [
        "| variant | starts: ready s (compile cache) | (a) out tok/s | (a) TTFT p99 ms | (b) goodput req/s | "
        "(c) TPOT p50 ms |",
        "|---|---|---|---|---|---|",
    ]

    def cell(vals: list[float], nd: int = 1) -> str:
        if not vals:
            return "—"
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        return f"{statistics.fmean(vals):.{nd}f} ± {sd:.{nd}f} ({min(vals):.{nd}f}–{max(vals):.{nd}f}, n={len(vals)})"

    for v in vrows:
        mine = [r for r in rows if r["variant"] == v["variant"] and r.get("objective_value") != ""]

        def vals(obj: str, key: str, mine: list[dict] = mine) -> list[float]:
            return [float(r[key]) for r in mine if r["objective"] == obj and r.get(key) not in ("", None)]

        starts = " / ".join(f"{r} ({c})" for r, _, c in (x.partition(" ") for x in v["starts"].split("; ")))
        out.append(
            f"| {v['variant']} | {starts} | {cell(vals('a', 'output_tok_s'), 0)} | "
            f"{cell(vals('a', 'ttft_p99_ms'), 0)} | {cell(vals('b', 'goodput_req_s'), 2)} | "
            f"{cell(vals('c', 'tpot_p50_ms'), 2)} |"
        )
    return "\n".join(out)


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(HERE / "data"))
    ap.add_argument("--grid", default=str(HERE / "grid.json"))
    ap.add_argument("--out", default=str(HERE), help="folder for table.csv and variants.csv")
    ap.add_argument("--slo-a-ttft-p99", type=float, default=None, help="ms (default: grid.json's)")
    ap.add_argument("--slo-b-ttft", type=float, default=None, help="ms, per request (default: grid.json's)")
    ap.add_argument("--slo-b-tpot", type=float, default=None, help="ms, per request (default: grid.json's)")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    grid = json.loads(Path(a.grid).read_text())
    slos = {
        "a": a.slo_a_ttft_p99 or grid["slos"]["a"]["ttft_p99_ms"],
        "b_ttft_ms": a.slo_b_ttft or grid["slos"]["b"]["ttft_ms"],
        "b_tpot_ms": a.slo_b_tpot or grid["slos"]["b"]["tpot_ms"],
    }
    # a sibling by path: this file runs as a script (synthetic.py imports its columns as a package module)
    from layout import read_variant, variant_launches

    rows: list[dict] = []
    vrows: list[dict] = []
    for vid in (v["id"] for v in grid["variants"]):
        folders = variant_launches(Path(a.data), vid)
        if not folders:
            continue
        launches = [read_variant(f) for f in folders]
        vrows.append(variant_row(launches))
        for n, (folder, variant) in enumerate(zip(folders, launches, strict=True), start=1):
            rows += probe_rows(folder, variant, grid, slos, launch=n)
    write_csv(Path(a.out) / "table.csv", TABLE_COLUMNS, rows)
    write_csv(Path(a.out) / "variants.csv", VARIANT_COLUMNS, vrows)
    scored = {
        "goodput": {
            name: {"ttft_ms": slos["b_ttft_ms"], "tpot_ms": slos["b_tpot_ms"]}
            for name, p in grid["probes"].items()
            if p["objective"] == "b"
        },
        "slos": slos,
        "note": "how table.csv was scored (the replay executor matches fixed_load's goodput bounds against it)",
    }
    (Path(a.out) / "table.json").write_text(json.dumps(scored, indent=1) + "\n")
    print(f"{len(vrows)} variants, {len(rows)} probe rows; SLOs {slos}")
    if a.markdown:
        print(markdown(rows, vrows))


if __name__ == "__main__":
    main()
