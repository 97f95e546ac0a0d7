"""A scheduler that makes the decisions vLLM v1's scheduler makes, step by step, without a GPU.

vLLM v1 has no prefill or decode phase: each step it gives every running request the tokens it still
needs (its prompt in chunks, or one token plus speculative tokens), within a per-step token budget
(`max_num_batched_tokens`) and at most `max_num_seqs` running requests; it allocates KV blocks for
them and, when the pool is empty, preempts the most recently admitted running request (recompute: its
blocks are freed and it starts over, with whatever prefix the cache still holds). Waiting requests are
admitted in arrival order while budget, sequence slots and blocks remain, and only in steps with no
preemption. Hybrid models with prefix caching ('align' mode) cut non-final prefill chunks to block
boundaries, which is also where their recurrent state is saved and so where prefix hits may end.

Pure and deterministic (speculative acceptance uses a seeded generator): `schedule()` plans a step,
`finish_step()` applies its outcome; time is someone else's business (see `engine.py`).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from servetune.sim.kvcache import BlockPool


@dataclass(frozen=True)
class SchedulerLimits:
    """What bounds a step: vLLM's scheduler and cache settings, with the pool size from the planner."""

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int
    num_blocks: int
    state_blocks_per_request: int = 0
    """Fixed blocks each request holds besides its attention blocks (hybrid models' recurrent state)."""
    hybrid: bool = False
    enable_prefix_caching: bool = True
    num_speculative_tokens: int = 0
    acceptance_rate: float = 0.0
    """Probability that each drafted token is accepted, given that the ones before it were."""
    long_prefill_token_threshold: int = 0
    chunked_prefill: bool = True
    """False: a prompt is only admitted when it fits the step's token budget whole."""
    async_scheduling: bool = False
    """vLLM plans step k+1 while step k runs: new requests join one step later under load (see engine.py)."""
    seed: int = 0

    @property
    def align_chunks(self) -> bool:
        """vLLM's mamba cache mode 'align': hybrid model with prefix caching."""
        return self.hybrid and self.enable_prefix_caching


class Status(Enum):
    """Where a request is: queued, holding blocks and scheduled, or done."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class SimRequest:
    """One request inside the scheduler: its prompt (as block hashes), output budget and progress."""

    request_id: str
    num_prompt_tokens: int
    max_tokens: int
    prompt_hashes: tuple[int, ...] = ()
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    status: Status = Status.WAITING
    blocks: list[int] = field(default_factory=list)
    state_blocks: list[int] = field(default_factory=list)
    num_cached_blocks: int = 0
    num_preemptions: int = 0
    num_cached_prompt_tokens: int = 0
    finish_reason: str | None = None

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens


class Scheduled(NamedTuple):
    """One request's share of a step: `num_new_tokens` computed on top of `context` cached tokens."""

    request: SimRequest
    num_new_tokens: int
    context: int
    samples: bool
    """True when this step ends at the request's last known token, so it produces output."""
    prefill: bool
    """True while the request is (re)computing its prompt; False for decode (+ speculative) tokens."""


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What one engine step computes, with the sums the step-time model prices."""

    scheduled: tuple[Scheduled, ...]
    preempted: tuple[str, ...]
    num_spec_tokens: int
    num_tokens: int = 0
    num_decode: int = 0
    """Scheduled requests past their prompt (each drafts `num_spec_tokens` when speculating)."""
    decode_context: int = 0
    """Tokens already cached, summed over the decode requests (their KV is read this step)."""
    prefill_chunks: tuple[tuple[int, int], ...] = ()
    """(new tokens, tokens already cached) of each prefill chunk in the step."""

    @property
    def empty(self) -> bool:
        return not self.scheduled


TokenEvent = tuple[SimRequest, int, "str | None"]
"""Tokens a request received at the end of a step: (request, number of tokens, finish reason or None).
A plain tuple: one is made per running request per step, on the estimate's hot path."""


@dataclass
class SchedulerCounters:
    """Running totals behind the engine's `/metrics` counters."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)


class Scheduler:
    """vLLM v1's scheduling loop over a `BlockPool` (FCFS policy, recompute preemption)."""

    def __init__(self, limits: SchedulerLimits) -> None:
        if limits.max_num_batched_tokens < limits.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({limits.max_num_batched_tokens}) must be greater than or equal "
                f"to max_num_seqs ({limits.max_num_seqs})."
            )
        self.limits = limits
        self.pool = BlockPool(limits.num_blocks)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.counters = SchedulerCounters(spec_accepted_per_pos=[0] * limits.num_speculative_tokens)
        self._rng = random.Random(limits.seed)

    # ------------------------------------------------------------------ requests in and out
    def check(self, request: SimRequest) -> None:
        """Rejects what vLLM rejects: a prompt that leaves no room to generate."""
        if request.num_prompt_tokens >= self.limits.max_model_len:
            raise ValueError(
                f"This model's maximum context length is {self.limits.max_model_len} tokens. However, "
                f"your request has {request.num_prompt_tokens} input tokens."
            )

    def add(self, request: SimRequest) -> None:
        """Queues a new request."""
        self.check(request)
        self.waiting.append(request)

    def abort(self, request_id: str) -> None:
        """Drops a request (client went away), freeing its blocks."""
        for req in list(self.running):
            if req.request_id == request_id:
                self.running.remove(req)
                self._free(req)
                req.status = Status.FINISHED
                req.finish_reason = "abort"
        for req in list(self.waiting):
            if req.request_id == request_id:
                self.waiting.remove(req)
                req.status = Status.FINISHED
                req.finish_reason = "abort"

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # ------------------------------------------------------------------ one step
    def schedule(self) -> StepPlan:
        """Plans the next step exactly in vLLM v1's order: running requests first, then waiting ones.

        The decode path is written out inline: it runs once per running request per step, and the
        estimate's speed (≥100× real time) rests on it.
        """
        lim = self.limits
        budget = lim.max_num_batched_tokens
        bs = lim.block_size
        max_len = lim.max_model_len
        spec = lim.num_speculative_tokens
        threshold = lim.long_prefill_token_threshold
        align = lim.align_chunks
        scheduled: list[Scheduled] = []
        preempted: list[str] = []
        tokens = decode = decode_context = 0
        chunks: list[tuple[int, int]] = []

        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            done = req.num_computed_tokens
            total = req.num_prompt_tokens + req.num_output_tokens
            prefill = done < req.num_prompt_tokens
            n = total - done if prefill else total + spec - done
            if prefill:
                if 0 < threshold < n:
                    n = threshold
                if n > budget:
                    n = budget
                if align:
                    n = self._align(req, done, n)
            elif n > budget:
                n = budget
            if n > max_len - done:
                n = max_len - done
            if n <= 0:
                i += 1
                continue
            if done + n + spec > len(req.blocks) * bs:
                while not self._allocate(req, n, spec):
                    victim = running.pop()
                    self._preempt(victim)
                    preempted.append(victim.request_id)
                    if victim is req:
                        break
                if req.status is not Status.RUNNING:
                    break
            scheduled.append(Scheduled(req, n, done, done + n >= total, prefill))
            tokens += n
            if prefill:
                chunks.append((n, done))
            else:
                decode += 1
                decode_context += done
            budget -= n
            i += 1

        if not preempted:
            while self.waiting and budget > 0 and len(running) < lim.max_num_seqs:
                req = self.waiting[0]
                hit = self._prefix_hit(req)
                done = len(hit) * bs
                n = self._chunk(req, req.num_tokens - done, budget, done)
                if n <= 0:
                    break
                if not self._admit(req, hit, done, n, spec):
                    break
                self.waiting.popleft()
                req.status = Status.RUNNING
                running.append(req)
                prefill = done < req.num_prompt_tokens
                scheduled.append(Scheduled(req, n, done, done + n >= req.num_tokens, prefill))
                tokens += n
                if prefill:
                    chunks.append((n, done))
                else:
                    decode += 1
                    decode_context += done
                budget -= n
        return StepPlan(tuple(scheduled), tuple(preempted), spec, tokens, decode, decode_context, tuple(chunks))

    def finish_step(self, plan: StepPlan) -> list[TokenEvent]:
        """Applies a step's outcome: advances requests, samples tokens, caches full blocks, finishes."""
        lim = self.limits
        max_len = lim.max_model_len
        caching = lim.enable_prefix_caching
        counters = self.counters
        running_status = Status.RUNNING
        events: list[TokenEvent] = []
        finished: list[SimRequest] = []
        generated = 0
        for req, n, context, samples, prefill in plan.scheduled:
            if req.status is not running_status:
                continue
            computed = req.num_computed_tokens + n
            req.num_computed_tokens = computed
            if prefill and caching:
                self._cache_blocks(req, chunk_end=computed)
            if not samples:
                continue
            prompt = req.num_prompt_tokens
            out = req.num_output_tokens
            new = 1
            if not prefill and context + n > prompt + out:
                drafts = context + n - prompt - out
                accepted = self._accept(drafts)
                # Rejected drafts were not really computed: vLLM rolls num_computed_tokens back.
                req.num_computed_tokens = computed - (drafts - accepted)
                new = min(1 + accepted, req.max_tokens - out, max_len - prompt - out)
            elif out == 0:
                counters.prompt_tokens += prompt
            out += new
            req.num_output_tokens = out
            generated += new
            if out >= req.max_tokens or prompt + out >= max_len:
                req.finish_reason = "length"
                finished.append(req)
                events.append((req, new, "length"))
            else:
                events.append((req, new, None))
        counters.generation_tokens += generated
        if finished:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
            for req in finished:
                self._free(req)
                req.status = Status.FINISHED
        return events

    def quiet_decode_steps(self) -> int:
        """How many coming steps are plain decode steps that change nothing but lengths (0 when unsure).

        True while nothing waits, every running request is past its prompt, no request speculates,
        finishes, or needs a new block: then each step gives every running request one token and the
        steps differ only in context length, so `advance_decode` can apply them in one go. This is how
        `estimate` stays far faster than real time at low concurrency; the server never uses it.
        """
        lim = self.limits
        if (
            self.waiting
            or not self.running
            or lim.num_speculative_tokens
            or len(self.running) > lim.max_num_batched_tokens
        ):
            return 0
        bs, max_len = lim.block_size, lim.max_model_len
        steps = 1 << 30
        for req in self.running:
            done = req.num_computed_tokens
            if done != req.num_prompt_tokens + req.num_output_tokens - 1:
                return 0
            room = len(req.blocks) * bs - done  # tokens that fit the blocks held
            left = min(req.max_tokens - req.num_output_tokens, max_len - done - 1)
            # Stop one step before a finish or a new block: that step takes the normal path.
            steps = min(steps, room - 1, left - 1)
            if steps <= 0:
                return 0
        return steps

    def advance_decode(self, steps: int) -> None:
        """Applies `steps` plain decode steps to every running request (see `quiet_decode_steps`)."""
        for req in self.running:
            req.num_computed_tokens += steps
            req.num_output_tokens += steps
        self.counters.generation_tokens += steps * len(self.running)

    # ------------------------------------------------------------------ helpers
    def _chunk(self, req: SimRequest, want: int, budget: int, done: int) -> int:
        """Tokens to give a waiting request this step: threshold, budget, and the hybrid 'align' cut."""
        lim = self.limits
        n = want
        if not lim.chunked_prefill and n > budget:
            return 0
        if 0 < lim.long_prefill_token_threshold < n:
            n = lim.long_prefill_token_threshold
        n = min(n, budget)
        return self._align(req, done, n) if lim.align_chunks else n

    def _align(self, req: SimRequest, done: int, n: int) -> int:
        """vLLM's `_mamba_block_aligned_split`: prefill chunks stop on block boundaries, and at the
        prompt's last full block, because that is where the recurrent state can be saved for reuse."""
        total = req.num_prompt_tokens + req.num_output_tokens
        if done >= max(req.num_prompt_tokens, total - 1):
            return n
        bs = self.limits.block_size
        last = total - total % bs
        if self.limits.num_speculative_tokens:
            last = max(last - bs, 0)
        if done + n < last:
            return n // bs * bs
        if done < last < done + n:
            return last - done
        return n

    def _blocks_needed(self, tokens: int) -> int:
        return -(-min(tokens, self.limits.max_model_len) // self.limits.block_size)

    def _allocate(self, req: SimRequest, n: int, lookahead: int) -> bool:
        """Grows a running request's blocks to cover `n` more tokens (+ lookahead); False if the pool is dry."""
        need = self._blocks_needed(req.num_computed_tokens + n + lookahead) - len(req.blocks)
        if need <= 0:
            return True
        if need > self.pool.num_free:
            return False
        req.blocks.extend(self.pool.allocate(need))
        return True

    def _admit(self, req: SimRequest, hit: list[int], computed: int, n: int, lookahead: int) -> bool:
        """Allocates a waiting request's blocks (hit blocks + new ones + its state blocks), or nothing."""
        lim = self.limits
        need = self._blocks_needed(computed + n + lookahead) - len(hit) + lim.state_blocks_per_request
        if need > self.pool.num_free - self.pool.evictable_among(hit):
            return False
        self.pool.touch(hit)
        req.blocks = list(hit)
        req.num_cached_blocks = len(hit)
        req.blocks.extend(self.pool.allocate(need - lim.state_blocks_per_request))
        req.state_blocks = self.pool.allocate(lim.state_blocks_per_request)
        if not req.num_preemptions:  # vLLM counts a re-admission apart (`preempted_queries`), not as a hit
            self.counters.prefix_queries += req.num_tokens
            self.counters.prefix_hits += computed
        req.num_cached_prompt_tokens = computed
        req.num_computed_tokens = computed
        return True

    def _prefix_hit(self, req: SimRequest) -> list[int]:
        lim = self.limits
        if not lim.enable_prefix_caching:
            return []
        max_blocks = (req.num_tokens - 1) // lim.block_size
        return self.pool.longest_hit(req.prompt_hashes, max_blocks, need_checkpoint=lim.hybrid)

    def _cache_blocks(self, req: SimRequest, chunk_end: int) -> None:
        """Publishes newly full prompt blocks; marks the chunk end as a saved recurrent state."""
        lim = self.limits
        if not lim.enable_prefix_caching:
            return
        full = min(chunk_end, req.num_prompt_tokens) // lim.block_size
        full = min(full, len(req.prompt_hashes), len(req.blocks))
        for j in range(req.num_cached_blocks, full):
            self.pool.cache(req.blocks[j], req.prompt_hashes[j])
        req.num_cached_blocks = max(req.num_cached_blocks, full)
        if lim.hybrid and chunk_end % lim.block_size == 0 and 0 < chunk_end <= req.num_prompt_tokens:
            self.pool.mark_checkpoint(req.blocks[chunk_end // lim.block_size - 1])

    def _preempt(self, req: SimRequest) -> None:
        """Recompute preemption: free everything, back to the front of the waiting queue."""
        self._free(req)
        req.status = Status.WAITING
        req.num_computed_tokens = 0
        req.num_cached_blocks = 0
        req.num_preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(req)

    def _free(self, req: SimRequest) -> None:
        self.pool.free(req.state_blocks)
        self.pool.free(req.blocks)
        req.blocks = []
        req.state_blocks = []

    def _accept(self, k: int) -> int:
        """Accepted drafts this step: position i accepted with `acceptance_rate` if all before were."""
        c = self.counters
        c.spec_drafts += 1
        c.spec_draft_tokens += k
        accepted = 0
        for pos in range(k):
            if self._rng.random() >= self.limits.acceptance_rate:
                break
            c.spec_accepted_per_pos[pos] += 1
            accepted += 1
        c.spec_accepted_tokens += accepted
        return accepted
