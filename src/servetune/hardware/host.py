"""This host's RAM as the kernel counts it: the device CPU engines (vLLM's CPU build, llama.cpp) hold their
weights and KV cache on."""

from __future__ import annotations

from typing import NamedTuple

import psutil


class HostMemory(NamedTuple):
    """Total RAM and what the kernel could give a new process now (`MemAvailable`: free memory plus the page cache
    and slabs it can reclaim), in bytes."""

    total_bytes: int
    available_bytes: int


def host_memory() -> HostMemory:
    memory = psutil.virtual_memory()
    return HostMemory(int(memory.total), int(memory.available))
