"""Measures the variants of grid.json that the data folder does not hold yet: the device campaign's driver, fed a
plan made from the grid, with two hooks (fixed-rate Poisson probes; a per-variant record on disk).

    python3 run_table.py --grid grid.json --done-from data --out /root/tt/dc [driver args ...]

Everything after this script's own arguments goes to benchmarks/device_campaign/driver.py unchanged (--deadline-file,
--tokenizer, --vllm, --scale, --no-gpu, --api-server, --env, --extra-flags, --dry-run, ...; see its docstring), so
the launch, the stop, the deadline rule and every probe file are that driver's. What this script adds:

- a folder of its own for each run (launch): `<out>/launch_<k>/` (`layout.py`), so that a relaunch on the same
  device (the lease had time left after the first launch ended at its deadline) never overwrites what an
  earlier launch wrote; `<out>/DONE` when it ends (what device_campaign/poll.sh waits for);
- the plan: the grid's variants in the grid's order, minus those done — some launch of it in the `--done-from`
  data folder (the committed measurements) or in an earlier launch under `--out` (this device session's, not
  committed yet) says `done` — each with the warm-up and then the probes' repeats interleaved (a1 b1 c1 a2 b2
  c2 ...), so that drift over a variant's minutes spreads over all objectives and a variant cut short still holds
  some repeats of each. A resumed grid measures only what is missing;
- fixed-rate Poisson probes: the campaign driver sets a Poisson point's rate from another point's measured
  throughput (`rate_ref` x `rate_factor`); here every Poisson probe refers to a unit throughput of 1 req/s, so its
  `rate_factor` is its rate and every variant gets the same arrivals;
- `<out>/launch_<k>/<variant>/variant.json` when the variant's server has stopped: argv, env, launch-to-ready,
  engine time, whether vLLM loaded its compiled graph from the compile cache or compiled it (its own log lines), the
  compile-cache key, vLLM's startup facts (servetune's parser of the log, plus the lines a flag-applied check reads)
  and each probe's outcome.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "device_campaign"))

import driver as campaign  # noqa: E402
from layout import done_anywhere, new_launch, numbered  # noqa: E402
from points import POINTS, Cls, Point  # noqa: E402

UNIT_REF = "_unit_rate"
"""The reference point a fixed-rate Poisson probe names: its request throughput is 1 req/s."""

COMPILE_RX = {
    "cache_key": r"Using cache directory: \S*/torch_compile_cache/([0-9a-f]+)/",
    "dynamo_s": r"Dynamo bytecode transform time: ([\d.]+) s",
    "compile_s": r"torch\.compile took ([\d.]+) s in total",
    "profile_run_s": r"Initial profiling/warmup run took ([\d.]+) s",
    "memory_profiling_s": r"Memory profiling takes ([\d.]+) seconds",
}
LINE_RX = {
    # the lines a flag-applied check compares with the flags asked for, verbatim
    "engine_config_line": r"Initializing a V1 LLM engine .*",
    "non_default_args_line": r"non-default args: .*",
    "chunked_prefill_line": r"Chunked prefill is enabled with .*",
    "attention_backend_lines": r"Using \S+ (?:attention )?backend.*",
    "kv_cache_lines": r"(?:GPU KV cache size|Maximum concurrency for|Available KV cache memory).*",
}


def probe_points(grid: dict) -> list[Point]:
    """The warm-up, then every probe's repeats interleaved; each repeat its own seed (its own prompts and
    arrivals), the same for every variant."""
    w = grid["warmup"]
    out = [
        Point(
            "warmup",
            "closed",
            (Cls("warm", w["input_tokens"], w["output_tokens"]),),
            requests=w["requests"],
            concurrency=w["concurrency"],
            est_s=w["est_s"],
            seed=w["seed"],
            tags=("warmup",),
        )
    ]
    for r in range(1, grid["repeats"] + 1):
        for name, p in grid["probes"].items():
            cls = (Cls(name, p["input_tokens"], p["output_tokens"], spread=p.get("spread", 0.0)),)
            common = {"est_s": p["est_s"], "seed": p["seed"] + r - 1, "tags": (p["objective"],)}
            if p["kind"] == "closed":
                point = Point(
                    f"{name}_r{r}",
                    "closed",
                    cls,
                    requests=p["requests"],
                    concurrency=p["concurrency"],
                    warmup_requests=p.get("warmup_requests", 0),
                    **common,
                )
            else:
                point = Point(
                    f"{name}_r{r}",
                    "poisson",
                    cls,
                    requests=0,
                    rate_factor=p["rate"],
                    rate_ref=UNIT_REF,
                    poisson_s=p["requests"] / p["rate"],
                    **common,
                )
            out.append(point)
    return out


def plan(
    grid: dict,
    points: list[Point],
    done: list[str],
    only: list[str],
    model_dir: str,
    common: list[str],
    machine_fresh: bool,
) -> dict:
    """The variants to measure: the grid's (or `only`) in grid order, minus `done`. The first start is cold only on
    a fresh machine (`machine_fresh`: no earlier launch on it), which sets its expected start time."""
    todo = [v for v in grid["variants"] if (not only or v["id"] in only) and v["id"] not in done]
    startups = []
    for k, v in enumerate(todo):
        cold = machine_fresh and k == 0
        startups.append(
            {
                "id": v["id"],
                "model": grid["model"],
                "model_dir": model_dir,
                "flags": [*v["flags"], *common],
                "factors": v["factors"],
                "priority": 1,
                "cold": cold,
                "est_start_s": grid["est_start_s"]["cold" if cold else "later"],
                "stop_after": "ready",
                "points": [
                    {
                        "name": p.name,
                        "priority": 1,
                        "sim_role": "warmup" if p.name == "warmup" else p.tags[0],
                        "est_s": p.est_s,
                    }
                    for p in points
                ],
            }
        )
    return {"table": grid["table"], "points": {p.name: p.as_dict() for p in points}, "startups": startups}


def startup_facts(text: str) -> dict:
    """What a vLLM log says of its start: servetune's parse, the compile-cache verdict, verbatim flag lines."""
    from servetune.engines.vllm import parse_vllm_log

    facts = parse_vllm_log(text)
    out: dict = {"engine_facts": facts.model_dump(mode="json")}
    for key, rx in COMPILE_RX.items():
        m = re.search(rx, text)
        out[key] = None if m is None else (m.group(1) if key == "cache_key" else float(m.group(1)))
    # vLLM's own lines: graphs from its compile cache, an AOT-compiled model from its AOT cache, or a compile
    loaded = len(re.findall(r"Directly load (?:the compiled graph|AOT compilation)", text))
    compiled = len(re.findall(r"Compiling a graph for compile range", text))
    out["compile_graphs_loaded"], out["compile_graphs_compiled"] = loaded, compiled
    # warm / cold / None (no compile lines: a start that died first, or --enforce-eager): servetune's reading
    out["compile_cache"] = facts.compile_cache
    out["aot_lines"] = [ln.strip() for ln in re.findall(r".*\bAOT\b.*", text)][:4]
    for key, rx in LINE_RX.items():
        found = [m.group(0).strip() for m in re.finditer(rx, text)]
        out[key] = found if key.endswith("_lines") else (found[-1] if found else None)
    return out


class TableMixin:
    """Hooks on the campaign driver (and its dry run): fixed-rate probes, variant.json after each stop, the
    session's DONE at the end."""

    out: Path
    manifest: dict
    startups: list[dict]

    def run(self) -> None:
        super().run()  # type: ignore[misc]
        # the driver's DONE is in this launch's folder; poll.sh waits for the one of the output folder above it
        (self.out.parent / "DONE").write_text(f"done: {self.out.name}\n")

    async def run_point(self, s: dict, p: dict, sdir: Path, results: dict) -> dict:
        results.setdefault(UNIT_REF, {"request_throughput": 1.0})
        return await super().run_point(s, p, sdir, results)  # type: ignore[misc]

    def event(self, kind: str, **kw) -> None:
        super().event(kind, **kw)  # type: ignore[misc]
        if kind == "stopped":
            self.write_variant(kw["id"])

    def write_variant(self, vid: str) -> None:
        rec = self.manifest["startups"][vid]
        s = next(x for x in self.startups if x["id"] == vid)
        sdir = self.out / vid
        sdir.mkdir(exist_ok=True)
        log = sdir / "vllm.log"
        facts = startup_facts(log.read_text(errors="replace")) if log.exists() else {}
        probes = {k: v for k, v in rec.get("points", {}).items() if k != "warmup"}
        complete = len(probes) == len(s["points"]) - 1 and all(v.get("outcome") == "ok" for v in probes.values())
        out = {
            "id": vid,
            "factors": s["factors"],
            "flags": s["flags"],
            # done: nothing left to measure (every probe repeat ok, or the server cannot start with these flags)
            "done": complete or rec.get("outcome") == "died",
            "complete": complete,
            "first_start_of_session": s["cold"],
            **{
                k: rec.get(k)
                for k in (
                    "outcome",
                    "why",
                    "argv",
                    "env",
                    "t_launch",
                    "t_ready",
                    "ready_s",
                    "stop_s",
                    "engine_s",
                    "version",
                    "nvidia_smi_ready",
                    "nvidia_smi_end",
                    "gpu_used_mib_before",
                )
            },
            "startup_facts": facts,
            "probes": rec.get("points", {}),
            "session_started": self.manifest["started"],
        }
        (sdir / "variant.json").write_text(json.dumps(out, indent=1) + "\n")


class TableDriver(TableMixin, campaign.Driver):
    pass


class TableDryRun(TableMixin, campaign.DryRun):
    pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default=str(HERE / "grid.json"))
    ap.add_argument("--done-from", default=str(HERE / "data"), help="data folder: variants done there are skipped")
    ap.add_argument(
        "--out",
        required=True,
        help="the device session's output folder: this launch writes <out>/launch_<k>/ (k: one past the last), and "
        "variants done by an earlier launch there are skipped",
    )
    ap.add_argument("--variants", default="", help="comma-separated variant ids (default: all not done)")
    ap.add_argument("--model-dir", default=None, help="instead of the grid's model_dir (rehearsal)")
    ap.add_argument("--common-flags", default=None, help="instead of the grid's common_flags (rehearsal)")
    mine, rest = ap.parse_known_args()
    grid = json.loads(Path(mine.grid).read_text())
    points = probe_points(grid)
    POINTS.update({p.name: p for p in points})
    common = grid["common_flags"] if mine.common_flags is None else shlex.split(mine.common_flags)
    only = [v for v in mine.variants.split(",") if v]
    session = Path(mine.out)
    session.mkdir(parents=True, exist_ok=True)
    fresh = not numbered(session) and not (session / "manifest.json").exists()  # no launch before this one
    done = [v["id"] for v in grid["variants"] if done_anywhere(v["id"], [Path(mine.done_from)], session)]
    out = new_launch(session)
    the_plan = plan(grid, points, done, only, mine.model_dir or grid["model_dir"], common, machine_fresh=fresh)
    (out / "plan.json").write_text(json.dumps(the_plan, indent=1) + "\n")
    print(f"{out.name} in {session}; done already: {done}", flush=True)
    print(f"{len(the_plan['startups'])} variants to measure: {[s['id'] for s in the_plan['startups']]}", flush=True)
    env = [a for kv in grid["env"] for a in ("--env", kv)]
    sys.argv = [sys.argv[0], "--plan", str(out / "plan.json"), "--out", str(out), *env, *rest]
    # the campaign driver's own argument parser and loop, with these classes in place of its own
    campaign.Driver, campaign.DryRun = TableDriver, TableDryRun  # type: ignore[misc]
    campaign.main()


if __name__ == "__main__":
    main()
