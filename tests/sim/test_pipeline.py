"""The engine's CPU/GPU pipeline under async scheduling (sim/engine.py): launch-bound steps, late deliveries."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servetune.sim.deployment import build_deployment
from servetune.sim.engine import SimEngine
from servetune.sim.flags import parse_sim_args
from servetune.sim.scheduler import SimRequest
from servetune.sim.steptime import StepCoefficients, StepTimeModel, prefill_launch_s

DEP = build_deployment(
    parse_sim_args(["qwen3.6-27b", "--max-model-len", "8192", "--gpu", "H200", "--vllm-version", "0.24.0"])
)
LAUNCH = 0.15


def engine(async_scheduling: bool = True, launch: float = LAUNCH) -> SimEngine:
    timing = StepTimeModel.of(DEP.timing.costs, DEP.timing.gpu, StepCoefficients(cpu_prefill_step_s=launch))
    return SimEngine(replace(DEP.limits, async_scheduling=async_scheduling), timing)


def request(rid: str, prompt: int, out: int) -> SimRequest:
    return SimRequest(rid, prompt, out)


def first_token_time(e: SimEngine, rid: str) -> float:
    clock = 0.0
    while e.has_work:
        outcome = e.step()
        clock += outcome.duration
        if any(req.request_id == rid for req, _, _ in outcome.events):
            return clock
    raise AssertionError("no token")


def test_a_short_prefill_lasts_its_launch_and_a_long_one_its_gpu_work() -> None:
    for prompt, launch_bound in ((64, True), (8000, False)):
        e = engine()
        e.submit(request("a", prompt, 4))
        first = e.step()  # an idle engine: the step only launches, nothing is delivered yet
        gpu, cpu = e.timing.gpu_time(first.plan), e.timing.cpu_time(first.plan)
        assert first.duration == pytest.approx(cpu) and not first.events
        assert (cpu > gpu) is launch_bound
        second = e.step()  # a's first decode planned; a's first token delivered
        assert [req.request_id for req, _, _ in second.events] == ["a"]
        ttft = first.duration + second.duration
        expected = cpu + e.timing.coef.cpu_step_s if launch_bound else gpu
        assert ttft == pytest.approx(expected, rel=1e-9)


def test_tokens_wait_for_the_next_steps_launch() -> None:
    """Request b arrives before the next planning: that step (b's prefill) launches slowly, and a's first token
    is handed over only once that launch is done."""
    ttft = {}
    for other in (False, True):
        e = engine()
        e.submit(request("a", 64, 8))
        first = e.step()
        if other:
            e.submit(request("b", 64, 8))
        second = e.step()
        assert [req.request_id for req, _, _ in second.events] == ["a"]
        assert bool(second.plan.prefill_chunks) is other
        ttft[other] = first.duration + second.duration
    assert ttft[True] - ttft[False] == pytest.approx(LAUNCH, rel=1e-9)


def test_sync_scheduling_adds_launch_and_gpu_time() -> None:
    e = engine(async_scheduling=False)
    e.submit(request("a", 64, 2))
    outcome = e.step()
    assert outcome.events and outcome.duration == pytest.approx(
        e.timing.cpu_time(outcome.plan) + e.timing.gpu_time(outcome.plan)
    )


def test_default_launch_cost_follows_the_layers() -> None:
    costs = DEP.timing.costs  # Qwen3.6-27B: 16 attention + 48 Gated-DeltaNet layers
    assert costs.num_layers == 64 and costs.num_linear_layers == 48
    assert DEP.timing.coef.cpu_prefill_step_s == pytest.approx(prefill_launch_s(costs))
    dense = build_deployment(parse_sim_args(["qwen3-32b", "--max-model-len", "8192", "--gpu", "H200"]))
    assert dense.timing.coef.cpu_prefill_step_s < DEP.timing.coef.cpu_prefill_step_s / 4
