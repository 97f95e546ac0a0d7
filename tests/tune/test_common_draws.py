"""Common random numbers: repeat r of every variant of a tune sends the same arrival times and request lengths,
with prompt texts of its own (so no run finds another's prompt in a prefix cache), and the stored results say
which draws they shared. Run through a real tune session on the simulator, the requests each run sent captured
where the load leaves servetune."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from servetune.load.prompts import RequestFactory, plan_conversation
from servetune.load.shape import LoadShape
from servetune.load.tokens import WordCounter
from servetune.load.workload import Workload
from servetune.sim.backend import SimBackend
from servetune.tune.execution.virtual import virtual_launcher
from servetune.tune.loop import run_experiment
from servetune.tune.schema.loader import parse_experiment

EXPERIMENT = """
name: common-draws
engine:
  engine: sim
  model: qwen3.5-4b
  flags: {gpu: L40S, time-scale: 50, max-model-len: 8192, max-num-seqs: 8}
hardware: {gpu: L40S, count: 1}
suite:
  repeats: 2
  warmup_requests: 0
  probes:
    fixed_load: {rate: 20, requests: 12, input_tokens: 64, output_tokens: 8, spread: 0.25}
objective: {probe: fixed_load, figure: output_tok_s}
variants:
  matrix:
    baseline: base
    changes: {seqs-4: {max-num-seqs: 4}}
"""

Sent = tuple[list[float], list[tuple[int, int]], list[str]]
"""One run's requests: send offsets (s), (input, output) lengths, prompt texts."""


def _sent(workload: Workload, shape: LoadShape) -> Sent:
    n = shape.requests or 0
    factory = RequestFactory(workload, WordCounter(), "completions")
    lengths = [
        (p.turns[0].input_tokens, p.turns[0].output_tokens)
        for p in map(lambda i: plan_conversation(workload, i), range(n))
    ]
    texts = [asyncio.run(factory.conversation(i)).turns[0].fields["prompt"] for i in range(n)]
    return [round(float(t), 9) for t in shape.arrivals(n)], lengths, texts


def test_repeat_r_of_every_variant_sends_the_same_arrivals_and_lengths_with_texts_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[tuple[Workload, LoadShape]] = []
    real = SimBackend.run

    async def run(self: SimBackend, workload: Workload, shape: LoadShape, **kw: Any) -> Any:
        loads.append((workload, shape))
        return await real(self, workload, shape, **kw)

    monkeypatch.setattr(SimBackend, "run", run)
    exp = parse_experiment(EXPERIMENT)
    outcome = run_experiment(exp, tmp_path, emit=lambda _: None, launcher=virtual_launcher(exp), reorder=False)
    assert [r.status for r in outcome.records] == ["done", "done"]
    # the session runs variant by variant, repeat by repeat: base r0, base r1, seqs-4 r0, seqs-4 r1
    (a0, a1, b0, b1) = [_sent(w, s) for w, s in loads]
    assert a0[0] == b0[0] and a1[0] == b1[0], "the same Poisson arrival times in repeat r of both variants"
    assert a0[1] == b0[1] and a1[1] == b1[1], "the same request lengths"
    assert len({length for length in a0[1]}) > 3, "the lengths are drawn (spread 0.25), not fixed"
    assert a0[0] != a1[0] and a0[1] != a1[1], "another repeat, other draws"
    texts = [t for sent in (a0, a1, b0, b1) for t in sent[2]]
    assert len({t.split()[0] + t.split()[1] for t in texts}) == len(texts), "every prompt its own from the start"

    draws = {(r.variant.name, run.repeat): run.result.draw for r in outcome.records for run in r.runs}
    assert draws[("base", 0)] == draws[("seqs-4", 0)] and draws[("base", 1)] == draws[("seqs-4", 1)], draws
    assert draws[("base", 0)] != draws[("base", 1)] and None not in draws.values(), draws
