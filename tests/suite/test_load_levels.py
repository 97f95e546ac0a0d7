"""Each level of a load curve sends prompts of its own: in 0.1 every level of one curve drew the same texts (the
run's seed), so llama.cpp's prompt cache and vLLM's prefix cache answered the levels after the first from cache
(llama-server logged 1 prompt token evaluated instead of 256) and their TTFT measured a cache hit."""

from __future__ import annotations

import asyncio

from servetune.engines.config import EngineConfig
from servetune.load.runner import LoadResult
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.slo import Slos
from servetune.sim.backend import SimBackend
from servetune.sim.deployment import deployment_for_config
from servetune.suite.registry import get_probe
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext


class Recording(SimBackend):
    """The simulator, remembering the workloads it was sent."""

    sent: list[Workload]

    async def run(self, workload: Workload, shape: LoadShape, *, slos: Slos | None = None) -> LoadResult:
        self.sent.append(workload)
        return await super().run(workload, shape, slos=slos)


def _curve(seed: int) -> list[Workload]:
    config = EngineConfig(engine="sim", model="qwen3.6-27b", flags={"gpu": "H200", "max-model-len": 8192})
    backend = Recording(deployment_for_config(config))
    backend.sent = []
    spec = get_probe("load_curve")
    params = spec.params.model_validate(
        {
            "concurrency": [1, 2, 4],
            "requests_per_point": 4,
            "input_tokens": 64,
            "output_tokens": 8,
            "stop_at_saturation": False,
        }
    )
    result = asyncio.run(run_probe(spec, ProbeContext(backend, seed=seed), params))
    assert result.ok and len(result.points) == 3
    return backend.sent


def test_each_level_draws_its_own_prompts_the_same_on_every_rerun() -> None:
    first = [w.seed for w in _curve(seed=7)]
    assert len(set(first)) == 3, "one seed per level"
    assert [w.seed for w in _curve(seed=7)] == first, "a rerun sends the same prompts"
    assert not set(first) & {w.seed for w in _curve(seed=8)}, "another run (repeat) sends others"
