"""`plan` and the tune recommendation print the same `vllm serve` and `docker run` lines for one config."""

from __future__ import annotations

from tune_synthetic import experiment, records

from servetune.engines.config import EngineConfig
from servetune.plan.api import plan_for
from servetune.tune.loop import default_feasibility
from servetune.tune.results.rank import rank
from servetune.tune.results.recommend import recommend


def test_plan_and_tune_print_the_same_commands_for_one_config() -> None:
    """They differed: `plan` added `--attention-backend TRITON_ATTN` (FP8 KV on A100) and `--gpus all`, the
    recommendation neither (`--gpus 2`). A variant is planned once, with the planner's verdict before its launch
    (`default_feasibility`, as the run plans it), and the recommendation prints what that plan serves."""
    config = EngineConfig(
        engine="vllm",
        model="qwen3.6-27b",
        version="0.24.0",
        flags={"tensor-parallel-size": 2, "max-model-len": 32768, "kv-cache-dtype": "fp8", "language-model-only": True},
    )
    exp = experiment()  # hardware: A100-80GB-SXM x 2
    served = default_feasibility(exp)(config).served
    recs = [r for r in records() if r.status == "done"]
    for record in recs:
        record.variant = record.variant.model_copy(update={"config": config, "served": served})
    rec = recommend(exp, rank(exp, recs))
    placed = exp.hardware.placement(config.flags)
    assert rec is not None and placed is not None
    plan = plan_for(config, placed.gpu, placed.gpus, vllm_version=config.version)
    assert rec.serve_command == plan.serve_command
    assert rec.docker_command == plan.docker_command
    assert "--attention-backend TRITON_ATTN" in plan.serve_command  # what vLLM needs for FP8 KV on an A100
    assert "--gpus 2" in plan.docker_command


def test_a_variant_the_planner_did_not_plan_keeps_its_measured_flags_and_says_so() -> None:
    config = EngineConfig(engine="vllm", model="qwen3.6-27b", flags={"tensor-parallel-size": 2})
    exp = experiment()
    recs = [r for r in records() if r.status == "done"]
    for record in recs:
        record.variant = record.variant.model_copy(update={"config": config})
    rec = recommend(exp, rank(exp, recs))
    assert rec is not None and "--attention-backend" not in rec.serve_command
    assert any("the planner did not plan this config" in note for note in rec.notes)
