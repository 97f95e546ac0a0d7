"""A measured table a tune can be replayed against: every variant of an exhaustive grid launched (once or more),
each probe measured in repeats, committed as data (`benchmarks/tuning_table/` is one; its README says how to make
another).

A table is a folder of four files:

- `grid.json` — the grid: `factors` (flag → the values measured), `variants` (each an `id` and its `factors`),
  `probes` (each table probe's load: `kind` closed or poisson, `concurrency` or `rate`, `requests`,
  `warmup_requests`, `input_tokens`, `output_tokens`, `spread`);
- `table.csv` — a row per variant × probe × repeat: `variant`, `probe`, `repeat` (repeat k of every variant measured
  with the same load draws, the same seeds, as `tune`'s repeats are), optional `launch` (a variant launched more
  than once has a repeat k of each launch: 1 = its first), `outcome` (`ok` or why not), the
  figures (`output_tok_s`, `request_per_s`, `goodput_req_s`, `ttft_p50_ms`, `ttft_p99_ms`, `tpot_p50_ms`,
  `tpot_p99_ms`, `e2el_p50_ms`), `completed`, `failed` and the repeat's `wall_s`;
- `variants.csv` — a row per variant: `variant`, `outcome` (`ready`, or the failure that stopped its start),
  `ready_s` (launch to ready, as it happened), `compile_cache` (cold / warm), optional `warm_ready_s` (a warm
  start measured too) and `warmup_s` (the warm-up after ready), and the startup facts vLLM logged;
- `table.json` (optional) — how the table was scored: `goodput` bounds per probe (`{"b_goodput": {"ttft_ms": 1000,
  "tpot_ms": 60}}`); without it `grid.json`'s `slos` of the probe's objective.

A table probe answers the `fixed_load` probe whose parameters describe the same load (`fixed_load_params`), so
an experiment names the operating point it tunes for, and the replay refuses one the table did not measure.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError

FIGURE_COLUMNS = {
    "output_tok_s": "output_tok_s",
    "request_per_s": "request_rps",
    "goodput_req_s": "goodput_rps",
    "ttft_p50_ms": "ttft_p50_ms",
    "ttft_p99_ms": "ttft_p99_ms",
    "tpot_p50_ms": "tpot_p50_ms",
    "tpot_p99_ms": "tpot_p99_ms",
    "e2el_p50_ms": "e2el_p50_ms",
    "e2el_p99_ms": "e2el_p99_ms",
}
"""A table.csv column → the `fixed_load` figure it is."""

FACT_COLUMNS = ("kv_cache_tokens", "available_kv_gib", "max_concurrency", "block_size", "attention_backend")


@dataclass(frozen=True)
class Repeat:
    """One measured repeat of one probe on one variant."""

    repeat: int
    ok: bool
    figures: dict[str, float]
    completed: int
    failed: int
    wall_s: float
    outcome: str
    launch: int = 1
    """Which launch of the variant measured it (1: the first)."""


@dataclass(frozen=True)
class TableVariant:
    """One measured cell: its flag values, how its start went and its probes' repeats (of every launch of it)."""

    id: str
    factors: dict[str, Any]
    outcome: str
    ready_s: float
    compile_cache: str
    warm_ready_s: float | None
    warmup_s: float
    cache_key: str | None
    facts: dict[str, Any]
    repeats: dict[str, list[Repeat]] = field(default_factory=dict)

    def launch_s(self, warm: bool) -> float:
        """Launch-to-ready charged for a start: the warm start when one was measured and the cache is warm by
        then, else the start as it happened (a cold one stands for any start it has no warm figure for)."""
        return self.warm_ready_s if warm and self.warm_ready_s is not None else self.ready_s


@dataclass(frozen=True)
class ReplayTable:
    """A table, read (see the module docstring)."""

    path: Path
    name: str
    factors: dict[str, list[Any]]
    probes: dict[str, dict[str, Any]]
    goodput: dict[str, dict[str, float]]
    variants: dict[str, TableVariant]
    synthetic: bool = False
    slos: dict[str, Any] = field(default_factory=dict)
    """The SLOs per objective the table names (grid.json's `slos`): what a study of it judges feasibility by."""

    @classmethod
    def load(cls, path: str | Path) -> ReplayTable:
        folder = Path(path)
        files = [folder / name for name in ("grid.json", "table.csv", "variants.csv")]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ServetuneError(
                f"executor.table {folder} is not a replay table: {', '.join(missing)} missing",
                "give a folder holding grid.json, table.csv and variants.csv (benchmarks/tuning_table/ is one)",
            )
        try:
            grid = json.loads(files[0].read_text())
            scored = json.loads((folder / "table.json").read_text()) if (folder / "table.json").is_file() else {}
            rows = _rows(files[1])
            vrows = _rows(files[2])
        except (OSError, ValueError) as err:
            raise ServetuneError(
                f"replay table {folder} cannot be read: {err}", "rebuild it (build_table.py)"
            ) from None
        probes = dict(grid.get("probes") or {})
        goodput = dict(scored.get("goodput") or {})
        for name, probe in probes.items():
            bounds = (grid.get("slos") or {}).get(probe.get("objective", ""), {})
            if name not in goodput and isinstance(bounds, dict) and {"ttft_ms", "tpot_ms"} & set(bounds):
                goodput[name] = {k: float(v) for k, v in bounds.items() if k in ("ttft_ms", "tpot_ms", "e2el_ms")}
        declared = {v["id"]: dict(v.get("factors") or {}) for v in grid.get("variants") or []}
        variants = {}
        for row in vrows:
            vid = row["variant"]
            if vid not in declared:
                continue
            variants[vid] = TableVariant(
                id=vid,
                factors=declared[vid],
                outcome=row.get("outcome") or "ready",
                ready_s=_float(row.get("ready_s")) or 0.0,
                compile_cache=row.get("compile_cache") or "cold",
                warm_ready_s=_float(row.get("warm_ready_s")),
                warmup_s=_float(row.get("warmup_s")) or 0.0,
                cache_key=row.get("cache_key") or None,
                facts={k: _fact(row[k]) for k in FACT_COLUMNS if row.get(k) not in (None, "")},
            )
        for row in rows:
            variant = variants.get(row["variant"])
            if variant is None:
                continue
            figures = {name: v for col, name in FIGURE_COLUMNS.items() if (v := _float(row.get(col))) is not None}
            outcome = row.get("outcome") or "ok"
            variant.repeats.setdefault(row["probe"], []).append(
                Repeat(
                    repeat=int(row["repeat"]),
                    ok=outcome == "ok",
                    figures=figures,
                    completed=int(_float(row.get("completed")) or 0),
                    failed=int(_float(row.get("failed")) or 0),
                    wall_s=_float(row.get("wall_s")) or _float(row.get("duration_s")) or 0.0,
                    outcome=outcome,
                    launch=int(_float(row.get("launch")) or 1),
                )
            )
        return cls(
            path=folder,
            name=str(grid.get("table") or folder.name),
            factors={k: list(v) for k, v in (grid.get("factors") or {}).items()},
            probes=probes,
            goodput=goodput,
            variants=variants,
            synthetic=bool(grid.get("synthetic")),
            slos=dict(grid.get("slos") or {}),
        )

    def repeat_numbers(self, probe: str) -> list[int]:
        """The repeat numbers some cell measured of a table probe, in order: repeat k of every cell was measured on
        the same load draws (the same seeds), so a replay that answers one variant's repeat with k answers every
        variant's with k."""
        return sorted({r.repeat for v in self.variants.values() for r in v.repeats.get(probe, [])})

    def find(self, engine: str, flags: dict[str, Any]) -> TableVariant | None:
        """The measured variant whose factor values the config's flags hold (None: the table has no such cell)."""
        names = self.factor_flags(engine)
        for variant in self.variants.values():
            own = _canonical(engine, variant.factors)
            if all(_same(flags.get(canon), own.get(canon)) for canon in names):
                return variant
        return None

    def factor_flags(self, engine: str) -> list[str]:
        """The table's factors by the engine vocabulary's canonical flag names."""
        return [next(iter(_canonical(engine, {name: values[0]}))) for name, values in self.factors.items()]

    def probe_for(self, params: dict[str, Any]) -> str | None:
        """The table probe that measured the load `fixed_load` parameters describe (None: none did)."""
        for name, probe in self.probes.items():
            if fixed_load_params(probe, self.goodput.get(name)) == _comparable(params):
                return name
        return None

    def probe_choices(self) -> str:
        """What the table measured, as `fixed_load` parameters (for messages)."""
        return "; ".join(
            f"{name}: {json.dumps(fixed_load_params(p, self.goodput.get(name)), sort_keys=True)}"
            for name, p in self.probes.items()
        )


def _canonical(engine: str, factors: dict[str, Any]) -> dict[str, Any]:
    """A cell's flags as a config of `engine` holds them (canonical names, typed values), so they compare with a
    variant's: the table's cells are engine configs, read by the one owner of a config's flags."""
    return dict(EngineConfig.model_validate({"engine": engine, "model": "table", "flags": factors}).flags)


def fixed_load_params(probe: dict[str, Any], goodput: dict[str, float] | None) -> dict[str, Any]:
    """A table probe as the `fixed_load` parameters that send the same load (and score goodput the same way)."""
    closed = probe.get("kind") == "closed"
    params: dict[str, Any] = {
        "concurrency": int(probe["concurrency"]) if closed else None,
        "rate": None if closed else float(probe["rate"]),
        "requests": int(probe["requests"]),
        "warmup_requests": int(probe.get("warmup_requests", 0)),
        "input_tokens": int(probe["input_tokens"]),
        "output_tokens": int(probe["output_tokens"]),
        "spread": float(probe.get("spread", 0.0)),
        "goodput": _bounds(goodput),
    }
    return params


def _comparable(params: dict[str, Any]) -> dict[str, Any]:
    """`fixed_load` parameters (as dumped) in the form `fixed_load_params` gives."""
    return {
        "concurrency": params.get("concurrency"),
        "rate": None if params.get("rate") is None else float(params["rate"]),
        "requests": params.get("requests"),
        "warmup_requests": params.get("warmup_requests", 0),
        "input_tokens": params.get("input_tokens"),
        "output_tokens": params.get("output_tokens"),
        "spread": float(params.get("spread", 0.0)),
        "goodput": _bounds(params.get("goodput")),
    }


def _bounds(value: dict[str, Any] | None) -> dict[str, float] | None:
    if not value:
        return None
    kept = {k: float(v) for k, v in value.items() if v is not None}
    return kept or None


def _same(a: Any, b: Any) -> bool:
    """Two flag values equal as the engine reads them (8192 and "8192" alike)."""
    if a is None or b is None:
        return a is b
    try:
        return math.isclose(float(a), float(b))
    except (TypeError, ValueError):
        return str(a) == str(b)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _float(value: str | None) -> float | None:
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _fact(value: str) -> Any:
    number = _float(value)
    if number is None:
        return value
    return int(number) if number.is_integer() else number
