"""The burst probe against the real llama.cpp server (4 slots): 16 requests at once are all served, the queue
shows in the worst TTFT, and the probe is known to the suite, experiments and objectives without other edits."""

from __future__ import annotations

import asyncio
from typing import Any

from servetune.load.backend import ClientSpec, LiveBackend
from servetune.suite.params import Probes
from servetune.suite.registry import all_probes, get_probe, named_objectives
from servetune.suite.run import run_probe
from servetune.suite.spec import ProbeContext


def test_a_burst_is_drained_and_its_queue_shows(llama_server: Any, tiny_model: Any) -> None:
    backend = LiveBackend(
        llama_server.base_url,
        llama_server.model_name,
        client=ClientSpec(endpoint="completions", tokenizer=str(tiny_model.tokenizer_json)),
        engine="llamacpp",
        max_model_len=llama_server.facts.max_model_len,
    )
    spec = get_probe("burst")
    params = spec.params.model_validate({"requests": 16, "input_tokens": 64, "output_tokens": 16})
    result = asyncio.run(run_probe(spec, ProbeContext(backend, slos={}, seed=3), params))
    f = result.figures
    assert result.ok and result.requests == 16 and f["failed"] == 0, result
    assert f["drain_s"] > 0 and f["output_tok_s"] > 0
    assert f["ttft_max_ms"] > f["ttft_p50_ms"] > 0, "16 requests on 4 slots: the last ones waited"


def test_the_suite_knows_it_from_its_module_alone() -> None:
    assert "burst" in all_probes()
    assert Probes.model_validate({"burst": {"requests": 8}}).enabled() == ["burst"]
    assert "burst_drain" in named_objectives()
