"""The planner's feasibility is vLLM's on the values it runs with, and no number a user can type reaches its
arithmetic unbounded: each case here ended in "servetune failed unexpectedly" (a MemoryError, a division by zero,
an overflow) or in a plan that fits where vLLM refuses to start."""

from __future__ import annotations

import pytest

from servetune.cli import main
from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.hardware.catalog import get_gpu
from servetune.model.bundled import bundled_model
from servetune.plan.api import plan_for
from servetune.sim.deployment import deployment_for_config

H200 = get_gpu("H200")


def plan(**flags: object) -> object:
    return plan_for(
        EngineConfig(engine="vllm", model=str(bundled_model("qwen3.6-27b")), flags=flags), H200, 1, with_fixes=False
    )


def test_max_num_seqs_above_the_default_budget_does_not_fit() -> None:
    """vLLM's SchedulerConfig refuses max_num_batched_tokens < max_num_seqs with the GPU's default budget as much
    as with a given one; `plan` said FITS while `estimate` raised a ValueError from the simulator's scheduler."""
    p = plan(max_num_seqs=10000)
    assert not p.feasible
    assert any(
        "max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs (10000)" in r for r in p.reasons
    )
    assert any("--max-num-batched-tokens 10000" in r for r in p.reasons)
    assert plan(max_num_seqs=10000, max_num_batched_tokens=16384).feasible
    with pytest.raises(ServetuneError, match="must be greater than or equal to max_num_seqs"):
        deployment_for_config(EngineConfig(engine="vllm", model="qwen3.6-27b", flags={"max-num-seqs": 10000}))


def test_a_kv_cache_larger_than_the_gpu_does_not_fit() -> None:
    for flags in ({"kv_cache_memory_bytes": 10**23}, {"num_gpu_blocks_override": 999_999_999_999}):
        p = plan(**flags)
        assert not p.feasible and any("more than the GPU's" in r for r in p.reasons), flags
    assert plan(num_gpu_blocks_override=1000).feasible


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--pipeline-parallel-size", "999999999999", "more than 4096"),
        ("--data-parallel-size", "99999999999999999999999", "more than 4096"),
        ("--speculative-config", '{"method":"mtp","num_speculative_tokens":-1}', "is not 0 to 64"),
        ("--speculative-config", '{"method":"mtp","num_speculative_tokens":1e308}', "is not 0 to 64"),
        ("--speculative-config", '{"method":"mtp","num_speculative_tokens":1.5}', "not a whole number"),
    ],
)
def test_numbers_beyond_any_deployment_are_errors(
    flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["plan", "--model", "qwen3.6-27b", "--gpu", "H200", flag, value])
    err = capsys.readouterr().err
    assert done.value.code == 2 and says in err and "unexpectedly" not in err, err


@pytest.mark.parametrize(
    "words",
    [
        ["--kv-cache-memory-bytes", "99999999999999999999999"],
        ["--num-gpu-blocks-override", "999999999999"],
        ["--max-num-seqs", "10000"],
    ],
)
def test_estimate_refuses_what_plan_refuses(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["estimate", "qwen3.6-27b", *words, "--concurrency", "2", "--requests", "4"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "vLLM would not start" in err and "unexpectedly" not in err, err
