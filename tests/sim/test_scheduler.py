"""The scheduler decides as vLLM v1 does: batching caps, chunked prefill, preemption, prefix hits."""

from __future__ import annotations

from servetune.sim.kvcache import block_hashes
from servetune.sim.scheduler import Scheduler, SchedulerLimits, SimRequest


def limits(**kw) -> SchedulerLimits:
    base = dict(max_num_seqs=8, max_num_batched_tokens=256, max_model_len=4096, block_size=16, num_blocks=1000)
    base.update(kw)
    return SchedulerLimits(**base)


def drain(s: Scheduler, max_steps: int = 100_000) -> list:
    plans = []
    while s.has_work and len(plans) < max_steps:
        plan = s.schedule()
        s.finish_step(plan)
        plans.append(plan)
    return plans


def req(i: int, prompt: int, out: int, ids: list[int] | None = None, bs: int = 16) -> SimRequest:
    hashes = block_hashes(ids, bs) if ids is not None else block_hashes([i * 100_000 + t for t in range(prompt)], bs)
    return SimRequest(str(i), prompt, out, hashes)


def test_max_num_seqs_caps_running_requests() -> None:
    s = Scheduler(limits(max_num_seqs=4))
    for i in range(10):
        s.add(req(i, 32, 8))
    plans = drain(s)
    assert max(len(p.scheduled) for p in plans) == 4
    assert all(len(p.scheduled) <= 4 for p in plans)
    assert s.counters.generation_tokens == 80


def test_chunked_prefill_respects_token_budget() -> None:
    s = Scheduler(limits(max_num_batched_tokens=100))
    s.add(req(0, 1000, 4))
    plans = drain(s)
    assert all(p.num_tokens <= 100 for p in plans)
    # 1000 prompt tokens in chunks of 100, then 3 more decode steps.
    assert len(plans) == 10 + 3
    assert s.counters.prompt_tokens == 1000


def test_beyond_kv_capacity_preempts_and_still_finishes() -> None:
    # 40 blocks of 16 tokens = 640 tokens; 8 requests that each grow to 200 tokens do not fit together.
    s = Scheduler(limits(num_blocks=40, max_num_batched_tokens=2048))
    for i in range(8):
        s.add(req(i, 100, 100))
    drain(s)
    assert s.counters.preemptions > 0
    assert s.counters.generation_tokens == 800
    assert s.pool.num_free == 40


def test_within_kv_capacity_never_preempts() -> None:
    s = Scheduler(limits(num_blocks=200, max_num_batched_tokens=2048))
    for i in range(8):
        s.add(req(i, 100, 100))
    drain(s)
    assert s.counters.preemptions == 0


def test_shared_prefix_hits_in_whole_blocks() -> None:
    shared = list(range(1000, 1100))  # 100 tokens = 6 full blocks of 16
    s = Scheduler(limits())
    s.add(req(0, 120, 2, ids=shared + [1] * 20))
    drain(s)
    s.add(req(1, 120, 2, ids=shared + [2] * 20))
    drain(s)
    assert s.counters.prefix_hits == 96
    assert s.counters.prefix_queries == 240


def test_hybrid_align_hits_only_at_saved_states() -> None:
    # Hybrid + prefix caching: non-final chunks end on block boundaries, hits only where state was saved.
    lim = limits(block_size=64, hybrid=True, max_num_batched_tokens=1024, state_blocks_per_request=3)
    s = Scheduler(lim)
    doc = list(range(5000, 5300))  # 300 tokens: 4 full blocks of 64
    s.add(req(0, 300, 1, ids=doc, bs=64))
    plans = drain(s)
    # One 300-token prompt with a 1024 budget: cut at 256 (a block boundary), then the last 44.
    assert [p.num_tokens for p in plans] == [256, 44]
    s.add(req(1, 300, 1, ids=doc, bs=64))
    drain(s)
    assert s.counters.prefix_hits == 256
    # A prompt that shares only the first 100 tokens: block 0 is cached, but no state was saved at 64.
    s.add(req(2, 300, 1, ids=doc[:100] + list(range(9000, 9200)), bs=64))
    drain(s)
    assert s.counters.prefix_hits == 256


def test_prefix_caching_off_never_hits() -> None:
    s = Scheduler(limits(enable_prefix_caching=False))
    ids = list(range(200))
    for i in range(3):
        s.add(req(i, 200, 2, ids=ids))
        drain(s)
    assert s.counters.prefix_hits == 0


def test_speculative_tokens_follow_acceptance() -> None:
    s = Scheduler(limits(num_speculative_tokens=2, acceptance_rate=1.0))
    s.add(req(0, 32, 31))
    plans = drain(s)
    # Prefill gives 1 token, then every step accepts both drafts: 3 tokens per step.
    assert len(plans) == 1 + 10
    assert s.counters.spec_accepted_tokens == 20
    none = Scheduler(limits(num_speculative_tokens=2, acceptance_rate=0.0))
    none.add(req(0, 32, 31))
    assert len(drain(none)) == 1 + 30


def test_deterministic() -> None:
    def run() -> tuple:
        s = Scheduler(limits(num_blocks=60, num_speculative_tokens=3, acceptance_rate=0.6, seed=3))
        for i in range(12):
            s.add(req(i, 50 + i, 40))
        plans = drain(s)
        return len(plans), s.counters.preemptions, s.counters.spec_accepted_tokens

    assert run() == run()


def test_without_chunked_prefill_a_prompt_waits_for_a_whole_budget() -> None:
    s = Scheduler(limits(max_num_batched_tokens=300, chunked_prefill=False))
    s.add(req(0, 200, 50))
    s.add(req(1, 200, 50))
    first = s.schedule()
    # The second 200-token prompt does not fit the 100 tokens left, and is not chunked.
    assert [x.num_new_tokens for x in first.scheduled] == [200]
    s.finish_step(first)
    assert [x.num_new_tokens for x in s.schedule().scheduled] == [1, 200]


def test_async_scheduling_admits_a_busy_engines_arrivals_one_step_later() -> None:
    """With async scheduling step k+1 is planned as soon as step k is launched, so a request arriving while the GPU
    computes step k joins step k+2; the synchronous engine takes it in step k+1."""
    from dataclasses import replace

    from servetune.sim.deployment import build_deployment
    from servetune.sim.engine import SimEngine
    from servetune.sim.flags import parse_sim_args
    from servetune.sim.steptime import StepCoefficients, StepTimeModel

    dep = build_deployment(parse_sim_args(["qwen3.6-27b", "--max-model-len", "8192", "--gpu", "H200"]))
    timing = StepTimeModel.of(dep.timing.costs, dep.timing.gpu, StepCoefficients(cpu_prefill_step_s=0.0))
    joined = {}
    for mode in (False, True):
        engine = SimEngine(replace(dep.limits, async_scheduling=mode), timing)
        engine.submit(req(0, 4000, 50, bs=dep.limits.block_size))
        first = engine.step()  # the engine was idle: request 0 is planned at once either way
        arrival = timing.cpu_time(first.plan) + timing.gpu_time(first.plan) / 2  # mid step 1 on the GPU
        clock, steps, waiting = first.duration, 1, True
        while "1" not in joined.get(mode, ""):
            if waiting and clock >= arrival:
                engine.submit(req(1, 100, 50, bs=dep.limits.block_size))
                waiting = False
            outcome = engine.step()
            steps += 1
            clock += outcome.duration
            if any(s.request.request_id == "1" for s in outcome.plan.scheduled):
                joined[mode] = f"1 in step {steps}"
    assert joined == {False: "1 in step 2", True: "1 in step 3"}
