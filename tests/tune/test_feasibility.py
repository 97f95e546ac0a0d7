"""The planner judges vLLM variants before any launch: what does not fit is skipped with its reasons."""

from __future__ import annotations

from pathlib import Path

from servetune.model.bundled import bundled_model
from servetune.tune.loader import load_experiment
from servetune.tune.loop import default_feasibility
from servetune.tune.variants import base_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tune" / "qwen36-27b-2xa100-r2.yaml"
QWEN = bundled_model("qwen3.6-27b")
"""Qwen3.6-27B's public config.json as shipped inside servetune (shapes only, no weights)."""


def test_planner_skips_what_does_not_fit_and_says_how_to_fix_it() -> None:
    exp = load_experiment(EXAMPLE)
    check = default_feasibility(exp)
    assert check is not None
    config = base_config(exp).model_copy(update={"model": str(QWEN)})
    assert check(config) == [], "seed 001's round-1 pick fits 2×A100-80GB"
    too_small = config.with_flags(**{"gpu-memory-utilization": 0.3})
    reasons = check(too_small)
    assert reasons and "short" in reasons[0] and any(r.startswith("fix:") for r in reasons)


def test_cpu_experiments_are_not_judged() -> None:
    exp = load_experiment(EXAMPLE.with_name("cpu-tiny.yaml"))
    assert default_feasibility(exp) is None


def test_a_tpot_slo_below_the_roofline_is_impossible(tmp_path: Path) -> None:
    import pytest

    from servetune.errors import ServetuneError

    text = (
        EXAMPLE.read_text()
        .replace("/models/Qwen3.6-27B", str(QWEN))
        .replace("  error_rate: 0\n", "  error_rate: 0\n  tpot_p99_ms: 2\n")
    )
    exp = tmp_path / "exp.yaml"
    exp.write_text(text)
    with pytest.raises(ServetuneError) as info:
        load_experiment(exp)
    assert "tpot_p99_ms = 2 ms can never be met" in str(info.value) and "roofline" in str(info.value)
    exp.write_text(text.replace("tpot_p99_ms: 2", "tpot_p99_ms: 80"))
    load_experiment(exp)
