"""The KV block pool of the simulated engine: paged blocks, prefix caching by block hash, LRU eviction.

It mirrors vLLM v1's `BlockPool` closely enough that capacity, preemption and prefix hits behave the same:
one shared pool of `num_blocks` pages (the null block excluded), freed blocks keep their hash and stay
hittable until they are reused, eviction takes the block that was freed longest ago, and a request's
blocks are freed tail first so that the end of a prompt is evicted before its shared beginning.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def block_hashes(token_ids: Sequence[int], block_size: int, salt: int = 0) -> tuple[int, ...]:
    """Chained hashes of the full blocks of a prompt: block j's hash covers every token before its end.

    Chaining is what makes a hit a *prefix* hit: equal blocks at equal positions after different text
    hash differently, as in vLLM.
    """
    hashes: list[int] = []
    parent = salt
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        hashes.append(parent)
    return tuple(hashes)


class BlockPool:
    """Free-block accounting with a hash → block map for cached (full, computed) blocks."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError("a block pool needs at least one block")
        self.num_blocks = num_blocks
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._checkpoint = [False] * num_blocks
        self._cached: dict[int, int] = {}
        # Free blocks in eviction order (front = evicted first). Cached free blocks stay here too.
        self._free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))

    @property
    def num_free(self) -> int:
        """Blocks that an allocation may take (free ones, including cached ones nobody references)."""
        return len(self._free)

    @property
    def usage(self) -> float:
        """vLLM's `kv_cache_usage_perc`: the fraction of blocks referenced by some request."""
        return 1.0 - len(self._free) / self.num_blocks

    def longest_hit(self, hashes: Sequence[int], max_blocks: int, need_checkpoint: bool) -> list[int]:
        """Cached blocks matching a prefix of `hashes` (at most `max_blocks`), not yet referenced.

        With `need_checkpoint` (hybrid models in vLLM's 'align' mode) a hit may only end on a block whose
        recurrent state was saved, so the run is cut back to the last such block.
        """
        hit: list[int] = []
        for h in hashes[:max_blocks]:
            block = self._cached.get(h)
            if block is None:
                break
            hit.append(block)
        if need_checkpoint:
            while hit and not self._checkpoint[hit[-1]]:
                hit.pop()
        return hit

    def evictable_among(self, blocks: Sequence[int]) -> int:
        """How many of `blocks` sit in the free queue (touching them removes them from it)."""
        return sum(1 for b in blocks if self._ref[b] == 0)

    def touch(self, blocks: Sequence[int]) -> None:
        """Takes a reference on cached blocks a request hit."""
        for b in blocks:
            if self._ref[b] == 0:
                del self._free[b]
            self._ref[b] += 1

    def allocate(self, n: int) -> list[int]:
        """Takes `n` blocks from the front of the free queue, evicting their cached hashes."""
        if n > len(self._free):
            raise ValueError(f"asked for {n} blocks, {len(self._free)} free")
        out: list[int] = []
        for _ in range(n):
            b, _none = self._free.popitem(last=False)
            h = self._hash[b]
            if h is not None:
                if self._cached.get(h) == b:
                    del self._cached[h]
                self._hash[b] = None
                self._checkpoint[b] = False
            self._ref[b] = 1
            out.append(b)
        return out

    def free(self, blocks: Sequence[int]) -> None:
        """Drops one reference per block, tail first, so a prompt's end is evicted before its start."""
        for b in reversed(blocks):
            self._ref[b] -= 1
            if self._ref[b] == 0:
                self._free[b] = None

    def cache(self, block: int, block_hash: int) -> None:
        """Registers a full computed block under its hash (the first block with a hash keeps it)."""
        if self._hash[block] is None and block_hash not in self._cached:
            self._hash[block] = block_hash
            self._cached[block_hash] = block

    def mark_checkpoint(self, block: int) -> None:
        """Records that the recurrent state at this block's end was saved (hybrid 'align' mode)."""
        self._checkpoint[block] = True

    def reset_prefix_cache(self) -> None:
        """Forgets every cached hash (vLLM's `/reset_prefix_cache`)."""
        for b in range(self.num_blocks):
            self._hash[b] = None
            self._checkpoint[b] = False
        self._cached.clear()
