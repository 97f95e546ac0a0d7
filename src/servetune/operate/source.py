"""Where a served config comes from, and the measurements that come with it.

A tuning folder (`servetune tune --out DIR`) gives the recommendation's winner config *and* what was measured
of it: cold starts (`launch_s`), the longest request, TTFT under the tuned load, the SLOs and the measured
capacity; serve and deploy size their settings from those.  An engine config file or a command line gives a
config only; its numbers then come from the running engine itself, or from the planner, and the files say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError, from_validation_error
from servetune.operate.evidence import Evidence, Sized

LONGEST_REQUEST_FIGURES = (
    ("long_generation.e2el_ms", 1e-3),
    ("decode_speed.e2el_ms", 1e-3),
    ("long_prefill.e2el_s", 1.0),
    ("acceptance.long_context_s", 1.0),
    ("short_latency.e2el_ms", 1e-3),
)
"""Figures (name, to seconds) whose largest value is the longest single request the tuning run measured."""


class Source(BaseModel):
    """A config to serve and its evidence."""

    model_config = ConfigDict(frozen=True)

    cfg: EngineConfig
    evidence: Evidence


def _load_structured(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ServetuneError(f"cannot read {path}: {err}", "give a readable UTF-8 YAML or JSON file") from err
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ServetuneError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {err}") from err


def config_from_data(data: Any, where: str) -> EngineConfig:
    """An EngineConfig from parsed data (a mapping of its fields), with the problem named on failure."""
    if not isinstance(data, dict):
        raise ServetuneError(
            f"{where} is not an engine config (a mapping with engine, model, flags, ...)",
            "write e.g. {engine: vllm, model: /models/m, flags: {max-model-len: 4096}}",
        )
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(
            err, where=where, fix="fields: engine (vllm|llamacpp|sglang), model, flags, env"
        ) from err


def load_config_file(path: Path) -> EngineConfig:
    """An engine config file (YAML or JSON of EngineConfig's fields)."""
    if not path.is_file():
        raise ServetuneError(f"no engine config file at {path}", "pass an existing .yaml/.json file or a tuning folder")
    return config_from_data(_load_structured(path), str(path))


def _figure(variant: dict[str, Any], name: str) -> float | None:
    entry = variant.get("figures", {}).get(name)
    value = entry.get("mean") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _percentile_under_load(variant: dict[str, Any], key: str) -> tuple[float, float] | None:
    """The worst `key` over the load-curve points that met the SLOs (or all points), and its concurrency."""
    points = [p for r in variant.get("runs", []) if r.get("probe") == "load_curve" for p in r.get("points", [])]
    meeting = [p for p in points if p.get("meets_slo")] or points
    values = [(float(p[key]), float(p.get("concurrency", 0))) for p in meeting if isinstance(p.get(key), int | float)]
    return max(values) if values else None


def load_tuning_folder(folder: Path, *, resolve: bool = True) -> Source:
    """The winner of a tuning folder's results.json, with what the run measured of it (`resolve`: the `tiny`
    model name becomes this machine's built tiny model, as serving needs; deployment files keep the name)."""
    path = folder / "results.json"
    if not path.is_file():
        raise ServetuneError(f"{folder} has no results.json", "pass the --out folder of a finished `servetune tune`")
    data = _load_structured(path)
    if not isinstance(data, dict) or not isinstance(data.get("variants"), list):
        raise ServetuneError(f"{path} is not a servetune results.json", "pass the --out folder of `servetune tune`")
    winner = data.get("winner")
    if not winner:
        raise ServetuneError(
            f"{path} has no winner ({data.get('reason') or 'no variant passed'})",
            "fix the failed variants and tune again, or serve an engine config file",
        )
    variants = {v.get("name"): v for v in data["variants"] if isinstance(v, dict)}
    chosen = variants.get(winner)
    if chosen is None:
        raise ServetuneError(f"{path}: the winner {winner!r} is not among its variants", "re-run `servetune report`")
    origin = f"tuning folder {folder} (winner {winner})"
    cfg = config_from_data(chosen.get("config"), f"{path} variants[{winner}].config")
    if resolve:
        from servetune.engines.models import resolve_model

        cfg = resolve_model(cfg)
    where = f"measured in {folder}, variant {winner}"
    longest: Sized | None = None
    for name, scale in LONGEST_REQUEST_FIGURES:
        value = _figure(chosen, name)
        if value is not None and (longest is None or value * scale > longest.value):
            longest = Sized(value=value * scale, source=f"{where}: {name}")
    under_load = _percentile_under_load(chosen, "e2el_p99_ms")
    if under_load and (longest is None or under_load[0] / 1000 > longest.value):
        longest = Sized(value=under_load[0] / 1000, source=f"{where}: load_curve e2el p99 at c={under_load[1]:g}")
    ttft = _percentile_under_load(chosen, "ttft_p99_ms")
    tpot = _percentile_under_load(chosen, "tpot_p99_ms")
    facts = chosen.get("facts") or {}
    experiment = data.get("experiment") or {}
    hardware = experiment.get("hardware") or {}
    sat = _figure(chosen, "load_curve.saturation_concurrency")
    return Source(
        cfg=cfg,
        evidence=Evidence(
            origin=origin,
            cold_starts_s={
                str(v["name"]): float(v["launch_s"])
                for v in variants.values()
                if isinstance(v.get("launch_s"), int | float) and v.get("status") != "failed"
            },
            longest_request=longest,
            p99_ttft=Sized(value=ttft[0] / 1000, source=f"{where}: load_curve ttft p99 at c={ttft[1]:g}")
            if ttft
            else None,
            p99_tpot=Sized(value=tpot[0] / 1000, source=f"{where}: load_curve tpot p99 at c={tpot[1]:g}")
            if tpot
            else None,
            slos={k: float(v) for k, v in (experiment.get("slos") or {}).items() if isinstance(v, int | float)},
            max_model_len=Sized(value=facts["max_model_len"], source=f"{where}: engine startup facts")
            if isinstance(facts.get("max_model_len"), int)
            else None,
            max_concurrency=Sized(value=facts["max_concurrency"], source=f"{where}: engine startup facts")
            if isinstance(facts.get("max_concurrency"), int | float)
            else None,
            saturation_concurrency=Sized(value=sat, source=f"{where}: load_curve saturation") if sat else None,
            gpu=hardware.get("gpu"),
            gpu_count=int(hardware.get("count") or 1),
        ),
    )


def load_source(path: Path, *, resolve: bool = True) -> Source:
    """A tuning folder or an engine config file."""
    if path.is_dir():
        return load_tuning_folder(path, resolve=resolve)
    cfg = load_config_file(path)
    if resolve:
        from servetune.engines.models import resolve_model

        cfg = resolve_model(cfg)
    return Source(cfg=cfg, evidence=Evidence(origin=f"engine config {path}"))
