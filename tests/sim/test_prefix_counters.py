"""The simulator's prefix-cache counters count as vLLM's do: a request re-admitted after a preemption is left out
of `vllm:prefix_cache_queries_total`/`_hits_total` (vLLM keeps it apart as `preempted_queries`/`preempted_hits`),
so its own blocks, still cached when it comes back, do not read as a hit of a cold prompt."""

from __future__ import annotations

from servetune.sim.kvcache import block_hashes
from servetune.sim.scheduler import Scheduler, SchedulerLimits, SimRequest


def test_a_preempted_request_is_queried_once() -> None:
    # 40 blocks of 16 tokens = 640 tokens; 8 requests that each grow to 200 tokens do not fit together.
    limits = SchedulerLimits(
        max_num_seqs=8, max_num_batched_tokens=2048, max_model_len=4096, block_size=16, num_blocks=40
    )
    s = Scheduler(limits)
    for i in range(8):
        s.add(SimRequest(str(i), 100, 100, block_hashes([i * 100_000 + t for t in range(100)], 16)))
    while s.has_work:
        s.finish_step(s.schedule())
    assert s.counters.preemptions > 0
    assert (s.counters.prefix_queries, s.counters.prefix_hits) == (800, 0), "8 cold prompts of 100 tokens"
