"""A bench folder measured on a real engine beside its simulated twin, load point by load point
(`servetune estimate MODEL [flags] --compare BENCH_DIR [--explain]`).

The twin is the calibration's replay (`calibration.replay_launch`): the folder's runs of `servetune bench`, in the
order they ran, through one simulated server (what earlier points left in its prefix cache is hit again), each
with its requests' own lengths and its load shape as offered. Both sides are read the same way: the headline
figures by `metrics.summary.summarize` over the measured requests whose stream timeline can be trusted (TTFT
p50/p99, TPOT p50, output tok/s), and the TTFT's parts from the engine's `/metrics` around the run by
`metrics.engine_time` (queue, prefill, API server, HTTP: means over every request of the run) — vLLM's histograms
on the measured side, the simulator's, with vLLM's names and definitions, on the other. So a miss says which
part misses: the queue (admission, the token budget), the prefill (the steps that carry the prompt), or the API
server. Errors are (simulated − measured) / measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servetune.errors import ServetuneError
from servetune.metrics.engine_time import EngineTime
from servetune.metrics.imports import find_runs
from servetune.metrics.runs import BenchRun
from servetune.metrics.summary import Summary, summarize
from servetune.sim.calibration import MeasuredRun, measured_summary, replay_launch, trusted
from servetune.sim.deployment import SimDeployment
from servetune.sim.explain import TTFTBreakdown, explain_ttft
from servetune.sim.results import run_of

FIGURES = (
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("ttft_p99_ms", "TTFT p99 ms"),
    ("tpot_p50_ms", "TPOT p50 ms"),
    ("output_tok_s", "out tok/s"),
)
"""The headline figures compared, from each side's `Summary` of the measured requests."""
PARTS = (
    ("ttft_mean_ms", "TTFT mean"),
    ("queue_ms", "queue"),
    ("prefill_ms", "prefill"),
    ("api_ms", "API server"),
    ("http_ms", "HTTP"),
)
"""The TTFT's parts compared (means over every request of the run, ms), from each side's engine split."""


class PointComparison(BaseModel):
    """One load point, measured and simulated."""

    model_config = ConfigDict(frozen=True)

    name: str
    level: str
    measured: dict[str, float | None]
    simulated: dict[str, float | None]
    errors: dict[str, float]
    """(simulated − measured) / measured, for each figure both sides have (measured ≠ 0)."""
    measured_time: EngineTime | None
    simulated_time: EngineTime | None
    explain: TTFTBreakdown | None = None
    """The simulator's own finer split of the twin's TTFT (`--explain`)."""


def _figures(summary: Summary, split: EngineTime | None) -> dict[str, float | None]:
    parts = split.parts() if split is not None else {}
    return {
        "ttft_p50_ms": summary.ttft_ms.p50,
        "ttft_p99_ms": summary.ttft_ms.p99,
        "tpot_p50_ms": summary.tpot_ms.p50,
        "output_tok_s": summary.output_throughput,
        "ttft_mean_ms": split.client_ttft_ms if split is not None else None,
        **{k: parts.get(k) for k, _ in PARTS[1:]},
    }


def _error(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or not real or not math.isfinite(sim) or not math.isfinite(real):
        return None
    return (sim - real) / real


def twins(folder: Path, deployment: SimDeployment) -> list[tuple[BenchRun, MeasuredRun]]:
    """The folder's runs of `servetune bench` (those that kept their load shape and records), in the order they
    ran, each as a measured run the simulator can replay."""
    if not folder.is_dir():
        raise ServetuneError(f"--compare {folder}: no such folder", "give a bench folder (`bench --save-result`)")
    runs = [r for r in find_runs(folder) if r.source.tool == "servetune" and r.records and "shape" in r.settings]
    if not runs:
        raise ServetuneError(
            f"--compare {folder}: no run of servetune bench with its records in it",
            "measure the points with `servetune bench ... --save-result --result-dir DIR` and give DIR",
        )
    runs.sort(key=lambda r: (r.source.started_at or "", r.name))
    # servetune's client keeps every chunk it receives, so a stream with fewer chunks than tokens is vLLM merging
    # outputs behind a busy API server (seen on the H200: 15 of 16 streams at c1), not a lost first chunk: its TTFT
    # and TPOT stand (one_chunk_per_token=False leaves out only streams without any chunk)
    return [
        (r, run_of(r.records, r.settings, deployment, r.name, Path(r.source.path or folder), one_chunk_per_token=False))
        for r in runs
    ]


def compare(pairs: Sequence[tuple[BenchRun, MeasuredRun]], *, explain: str | None = None) -> list[PointComparison]:
    """Each run beside its replay (one simulated server for all, in order); `explain`: also the simulator's finer
    split of the twin's TTFT for that request class ("" for the first class)."""
    replayed = replay_launch([m for _, m in pairs], account=True)
    out = []
    for bench, run in pairs:
        twin = replayed[run.name]
        sim_summary = summarize(trusted(twin.records, run.untimed))
        measured = _figures(measured_summary(run), bench.engine_time)
        simulated = _figures(sim_summary, twin.engine_time)
        errors = {k: e for k in measured if (e := _error(simulated[k], measured[k])) is not None}
        why = None
        if explain is not None and twin.trace is not None and twin.records:
            why = explain_ttft(twin.trace, twin.records, explain or None)
        out.append(
            PointComparison(
                name=bench.name,
                level=bench.source.level_text,
                measured=measured,
                simulated=simulated,
                errors=errors,
                measured_time=bench.engine_time,
                simulated_time=twin.engine_time,
                explain=why,
            )
        )
    return out


def _cell(real: float | None, sim: float | None, err: float | None, digits: int) -> str:
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v + 0.0 if abs(v) >= 0.5 * 10**-digits else 0.0:,.{digits}f}"

    return f"{num(real)} / {num(sim)} ({'-' if err is None else f'{err:+.0%}'})"


def comparison_lines(points: Sequence[PointComparison], label: str) -> list[str]:
    """The comparison as `estimate --compare` prints it: the headline figures, then the TTFT's parts (measured /
    simulated (error)), one row per load point; with `--explain`, each point's parts side by side and the
    simulator's finer split."""
    width = max([len(p.level) for p in points] + [5])
    out = [f"== measured / simulated ({label}), (sim − real) / real ==", ""]
    out.append(f"{'point':<{width}}  " + "  ".join(f"{title:>26}" for _, title in FIGURES))
    for p in points:
        cells = [_cell(p.measured[k], p.simulated[k], p.errors.get(k), int(k != "output_tok_s")) for k, _ in FIGURES]
        out.append(f"{p.level:<{width}}  " + "  ".join(f"{c:>26}" for c in cells))
    out += ["", "TTFT by part, mean over every request of the point (ms; the engine's /metrics on both sides):"]
    out.append(f"{'point':<{width}}  " + "  ".join(f"{title:>26}" for _, title in PARTS))
    for p in points:
        cells = [_cell(p.measured[k], p.simulated[k], p.errors.get(k), 1) for k, _ in PARTS]
        out.append(f"{p.level:<{width}}  " + "  ".join(f"{c:>26}" for c in cells))
    missing = [p.level for p in points if p.measured_time is None]
    if missing:
        out.append(f"no engine split measured for {', '.join(missing)} (the server exposed no vLLM histograms)")
    for p in points:
        if p.explain is None:
            continue
        out += ["", f"-- {p.name} --"]
        for side, split in (("measured", p.measured_time), ("simulated", p.simulated_time)):
            if split is not None:
                out += [f"{side}: {line}" if i == 0 else line for i, line in enumerate(split.lines())]
        out += [f"simulated, finer: {line}" if i == 0 else line for i, line in enumerate(p.explain.lines())]
    return out
