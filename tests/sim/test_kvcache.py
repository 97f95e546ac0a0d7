"""The block pool keeps freed blocks hittable until reused and evicts the least recently freed first."""

from __future__ import annotations

from servetune.sim.kvcache import BlockPool, block_hashes


def test_chained_hashes_make_hits_prefix_hits() -> None:
    a = block_hashes([1, 2, 3, 4, 5, 6], 2)
    b = block_hashes([9, 9, 3, 4, 5, 6], 2)
    assert len(a) == 3 and a[1:] != b[1:]  # equal blocks after a different start hash differently


def test_lru_eviction_of_cached_blocks() -> None:
    pool = BlockPool(4)
    first = pool.allocate(2)
    for block, h in zip(first, (11, 12), strict=True):
        pool.cache(block, h)
    pool.free(first)  # tail first: block for hash 12 becomes evictable before 11
    assert pool.num_free == 4 and pool.usage == 0.0
    assert pool.longest_hit([11, 12], 2, need_checkpoint=False) == first
    pool.allocate(2)  # the two never-used blocks go first
    assert pool.longest_hit([11, 12], 2, need_checkpoint=False) == first
    pool.allocate(1)  # now the least recently freed cached block (hash 12, freed first) is evicted
    assert pool.longest_hit([11, 12], 2, need_checkpoint=False) == first[:1]
    hit = pool.longest_hit([11], 1, need_checkpoint=False)
    pool.touch(hit)
    assert pool.num_free == 0 and pool.usage == 1.0
