"""The planner judges vLLM variants before any launch: what does not fit is skipped with its reasons."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from servetune.model.bundled import bundled_model
from servetune.tune.loop import default_feasibility
from servetune.tune.schema.loader import load_experiment
from servetune.tune.schema.variants import base_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tune" / "qwen36-27b-2xa100-r2.yaml"
QWEN = bundled_model("qwen3.6-27b")
"""Qwen3.6-27B's public config.json as shipped inside servetune (shapes only, no weights)."""


def test_planner_skips_what_does_not_fit_and_says_how_to_fix_it() -> None:
    exp = load_experiment(EXAMPLE)
    check = default_feasibility(exp)
    assert check is not None
    config = base_config(exp).model_copy(update={"model": str(QWEN)})
    fits = check(config)
    assert fits.reasons == (), "seed 001's round-1 pick fits 2×A100-80GB"
    assert fits.served is not None and fits.served.flags["attention-backend"] == "TRITON_ATTN", "as plan serves it"
    too_small = config.with_flags(**{"gpu-memory-utilization": 0.3})
    reasons = check(too_small).reasons
    assert reasons and "short" in reasons[0] and any(r.startswith("fix:") for r in reasons)


def test_cpu_experiments_are_judged_for_their_model_only() -> None:
    exp = load_experiment(EXAMPLE.with_name("cpu-tiny.yaml"))
    check = default_feasibility(exp)
    assert check(base_config(exp)).reasons == (), "the tiny model is built when first used: it can start"
    gone = base_config(exp).model_copy(update={"model": "/no/such/model.gguf"})
    assert check(gone).reasons[0].startswith("model_missing: the GGUF file /no/such/model.gguf does not exist")


def _servetune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servetune", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_check_warns_and_the_run_exits_1_when_no_variant_can_start(tmp_path: Path) -> None:
    """The seed's round-2 file on a machine without its model: `--check` used to call it valid, and the run
    exited 0 with all 14 variants failed (model missing). Both now say why, before any launch."""
    check = _servetune("tune", str(EXAMPLE), "--check", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert "warning: 14 of 14 variants cannot start" in check.stdout
    assert "model_missing: the model directory /models/Qwen3.6-27B does not exist" in check.stdout
    assert "warning: no variant can start" in check.stdout
    run = _servetune("tune", str(EXAMPLE), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "none of the 14 variants succeeded (14 skipped); the first, R2-A0: model_missing" in run.stderr
    assert "Traceback" not in run.stderr


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
