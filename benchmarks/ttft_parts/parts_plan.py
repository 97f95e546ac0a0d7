"""The per-part TTFT campaign on the device: the plan from `split.json` minus what is measured, its dry run, and
the filing of what a session brought back (issue 26).

    .venv/bin/python -m benchmarks.ttft_parts.parts_plan --dry-run        # what one 25-minute session measures
    .venv/bin/python -m benchmarks.ttft_parts.parts_plan --out benchmarks/ttft_parts/plan_next.json
    .venv/bin/python -m benchmarks.ttft_parts.parts_plan --collect /work/.device/N/dc.tgz

The plan is a plan of the device campaign's driver (`../device_campaign/driver.py`: launch, deadline rule, stop,
probe files; its points defined in the plan itself, the Poisson ones at a fixed rate): one vLLM start per (family,
setting) still to measure, in `split.json`'s order, each with a warm-up and then its points' repeats interleaved
(solo_1k_r1 solo_8k_r1 light_r1 queue_r1 burst_r1 solo_1k_r2 ...: drift spreads over every point, and a start cut
short still holds repeats of each). Repeat r of a point has the same seed on every setting. A start whose points all
came back (or that vLLM refused: the flags cannot run) is done: `--collect` files a session's tar under
`data/parts/<its UTC start>/`, and the next plan leaves the done starts out — what is done is what is on disk.

One session: ~25 device-minutes = staging (~2 min: the vLLM bundle's parts) + the driver's budget + the final
tar and its transfer (~1.5 min), so the driver gets `SESSION_BUDGET_S`; it starts nothing that would end later.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.device_campaign.points import Cls, Point

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SPLIT = HERE / "split.json"
PARTS_DATA = HERE / "data/parts"
DRIVER = ROOT / "benchmarks/device_campaign/driver.py"
SESSION_BUDGET_S = 1300
"""25 device-minutes (1,500 s) − staging (~120 s) − the final poll, tar and transfer (~80 s)."""
STOP_S = 10.0
"""A vLLM stop as the driver books it (measured 2.7-3 s on the H200 for the 27B, plus the GPU memory's return)."""


def load_split(path: Path = SPLIT) -> dict[str, Any]:
    return json.loads(path.read_text())


def setting_id(family: str, setting: list[int]) -> str:
    """A start's id: family, token budget, seats (`hybrid_b4096_s128`)."""
    return f"{family}_b{setting[0]}_s{setting[1]}"


def points(split: dict[str, Any]) -> list[Point]:
    """The warm-up, then every point's repeats interleaved; repeat r's seed is the point's seed + r − 1."""
    w = split["warmup"]
    out = [
        Point(
            "warmup", "closed", (Cls("warm", w["input_tokens"], w["output_tokens"]),), requests=w["requests"],
            concurrency=w["concurrency"], est_s=w["est_s"], seed=w["seed"], tags=("warmup",),
        )
    ]  # fmt: skip
    for r in range(1, split["repeats"] + 1):
        for name, p in split["points"].items():
            cls = (Cls(name, p["input_tokens"], p["output_tokens"], spread=p.get("spread", 0.0)),)
            common: dict[str, Any] = {"est_s": p["est_s"], "seed": p["seed"] + r - 1, "tags": (name,)}
            if p["kind"] == "poisson":
                point = Point(
                    f"{name}_r{r}", "poisson", cls, requests=0, rate_factor=p["rate"], rate_ref=None,
                    poisson_s=p["requests"] / p["rate"], **common,
                )  # fmt: skip
            else:
                point = Point(
                    f"{name}_r{r}", p["kind"], cls, requests=p["requests"], concurrency=p.get("concurrency"),
                    warmup_requests=p.get("warmup_requests", 0), **common,
                )  # fmt: skip
            out.append(point)
    return out


def est_s(point: Point, speed: float) -> float:
    """A point's expected seconds on a family (est_s is the 27B hybrid's); a Poisson point lasts its arrivals at
    least, however fast the model."""
    if point.kind == "poisson":
        return round(max(point.poisson_s + 3.0, point.est_s * speed), 1)
    return round(max(2.0, point.est_s * speed), 1)


def wanted(split: dict[str, Any]) -> list[tuple[str, list[int], str]]:
    """(family, setting, role) of every start to measure, in the split's order."""
    measure = split["measure"]
    out = []
    for fam, role in measure["order"]:
        settings = measure["fit"][fam] if role == "fit" else split["settings"]["held_out"]
        out += [(fam, s, role) for s in settings]
    return out


def done_starts(data: Path = PARTS_DATA) -> dict[str, str]:
    """Starts already measured, from every filed session's manifest: id → how it ended (ready: every point ok;
    died: vLLM refused the flags — measuring again would not help)."""
    out: dict[str, str] = {}
    for manifest in sorted(data.glob("*/manifest.json")):
        for sid, rec in json.loads(manifest.read_text()).get("startups", {}).items():
            pts = rec.get("points", {})
            if rec.get("outcome") == "died" or (
                rec.get("outcome") == "ready" and pts and all(p.get("outcome") == "ok" for p in pts.values())
            ):
                out[sid] = f"{rec['outcome']} ({manifest.parent.name})"
    return out


def plan(split: dict[str, Any], done: dict[str, str]) -> dict[str, Any]:
    """The driver's plan: the starts not done, each with its points (see the module docstring)."""
    pts = points(split)
    fams = split["families"]
    starts: list[dict[str, Any]] = []
    for fam, setting, role in wanted(split):
        sid = setting_id(fam, setting)
        if sid in done:
            continue
        f = fams[fam]
        cold = not any(s["family"] == fam for s in starts)
        starts.append(
            {
                "id": sid,
                "model": f["model"],
                "family": fam,
                "model_dir": f"/root/models/{f['model']}",
                "role": role,
                "setting": setting,
                "flags": [
                    *f["flags"],
                    *("--max-num-batched-tokens", str(setting[0]), "--max-num-seqs", str(setting[1])),
                ],
                "priority": 1,
                "cold": cold,
                "est_start_s": f["est_start_s"]["cold" if cold else "later"],
                "stop_after": "ready",
                "points": [
                    {
                        "name": p.name,
                        "priority": 1,
                        "sim_role": "warmup" if p.name == "warmup" else role,
                        "est_s": est_s(p, f["speed"]),
                    }
                    for p in pts
                ],
            }
        )
    return {
        "campaign": "ttft_parts",
        "split": str(SPLIT.relative_to(ROOT)),
        "points": {p.name: p.as_dict() for p in pts},
        "startups": starts,
        "done": done,
    }


def dry_run(the_plan: dict[str, Any], budget_s: float, start_factor: float) -> list[str]:
    """The driver's own decisions on a virtual clock (`driver.py --dry-run`) for one session's budget, told as
    what would be measured."""
    with tempfile.TemporaryDirectory(prefix="parts_plan-") as tmp:
        path = Path(tmp) / "plan.json"
        path.write_text(json.dumps(the_plan))
        subprocess.run(
            [
                sys.executable, str(DRIVER), "--plan", str(path), "--out", str(Path(tmp) / "out"),
                "--dry-run", "--dry-budget-s", str(budget_s), "--dry-start-factor", str(start_factor),
                "--stop-s", str(STOP_S), "--deadline-file", str(Path(tmp) / "none"),
                "--pid-file", str(Path(tmp) / "pid"),
            ],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        manifest = json.loads((Path(tmp) / "out/manifest.json").read_text())
    by_id = {s["id"]: s for s in the_plan["startups"]}
    lines = [
        f"One session: {budget_s:.0f} s for the driver (starts at {start_factor:g} x their estimates), "
        f"{len(the_plan['startups'])} starts still to measure, {len(the_plan['done'])} done"
    ]
    t0 = manifest["started"]
    end = t0
    measured = 0
    for sid, rec in manifest["startups"].items():
        s = by_id[sid]
        if rec.get("outcome") == "skipped":
            lines.append(f"  {sid:<22} {s['role']:<8} skipped: {rec['why']}")
            continue
        ok = [name for name, p in rec["points"].items() if p.get("outcome") == "ok" and name != "warmup"]
        measured += len(ok)
        end = rec.get("t_stopped", end)
        kinds = sorted({n.rsplit("_r", 1)[0] for n in ok})
        reps = min((sum(1 for n in ok if n.rsplit("_r", 1)[0] == k) for k in kinds), default=0)
        lines.append(
            f"  {sid:<22} {s['role']:<8} {'cold' if s['cold'] else 'later'} start {s['est_start_s']} s, "
            f"{len(ok)} point repeats ({', '.join(kinds)} x{reps}), stopped at {rec.get('t_stopped', t0) - t0:.0f} s"
        )
    lines.append(f"  => {measured} point repeats in {end - t0:.0f} s of {budget_s:.0f}")
    return lines


def collect(tar: Path, data: Path = PARTS_DATA) -> Path:
    """Files a session's tar (`dc/` as poll.sh packs it) under data/parts/<UTC start>/, the large files gzipped."""
    with tempfile.TemporaryDirectory(prefix="parts_collect-") as tmp:
        with tarfile.open(tar) as t:
            t.extractall(tmp, filter="data")
        src = Path(tmp) / "dc"
        manifest = json.loads((src / "manifest.json").read_text())
        dest = data / time.strftime("%Y-%m-%dT%H%MZ", time.gmtime(manifest["started"]))
        dest.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.rglob("*")):
            if not f.is_file() or f.name in ("driver.pid", "deadline"):
                continue
            out = dest / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            if f.suffix in (".jsonl", ".prom", ".log") and f.name != "driver.log":
                out.with_name(out.name + ".gz").write_bytes(gzip.compress(f.read_bytes(), 9, mtime=0))
            else:
                shutil.copyfile(f, out)
    return dest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="write the plan here (what launch.sh's DC_PLAN names)")
    p.add_argument("--dry-run", action="store_true", help="what one session would measure")
    p.add_argument("--budget-s", type=float, default=SESSION_BUDGET_S, help="the driver's seconds in one session")
    p.add_argument("--start-factor", type=float, default=1.0, help="starts take this x their estimate (dry run)")
    p.add_argument("--collect", type=Path, help="a session's dc.tgz: file it under data/parts/")
    a = p.parse_args()
    if a.collect is not None:
        print(collect(a.collect))
        return 0
    the_plan = plan(load_split(), done_starts())
    if a.out is not None:
        a.out.write_text(json.dumps(the_plan, indent=1) + "\n")
        print(f"{a.out}: {len(the_plan['startups'])} starts: {[s['id'] for s in the_plan['startups']]}")
    if a.dry_run:
        print("\n".join(dry_run(the_plan, a.budget_s, a.start_factor)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
