"""Synthetic variant records (the store's types, filled by hand) for testing ranking and reports without engines.

The numbers echo seed 001's round 2 (decode tok/s, prefill s, headroom) so the outcomes are easy to check."""

from __future__ import annotations

import random

from servetune.engines.config import EngineConfig
from servetune.load.backend import ClientSpec
from servetune.suite.result import ProbeResult
from servetune.tune.results.result import Failure, RunResult, VariantRecord
from servetune.tune.schema.loader import parse_experiment
from servetune.tune.schema.variants import matrix_variants

EXPERIMENT = """
name: synthetic-r2
engine:
  model: /models/Qwen3.6-27B
  flags: {tensor-parallel-size: 2, max-model-len: 131072, max-num-seqs: 2, gpu-memory-utilization: 0.92,
          kv-cache-dtype: fp8}
hardware: {gpu: a100-80gb-sxm, count: 2}
suite:
  repeats: 3
  probes: {short_latency: , decode_speed: , long_prefill: , memory_headroom: , load_curve: {concurrency: [1, 2, 4]}}
slos: {memory_headroom_pct: 5, ttft_p99_ms: 5000}
objective: decode_tok_s
sampling_presets:
  thinking-general: {temperature: 1.0, top_p: 0.95, top_k: 20, presence_penalty: 0.0}
variants:
  matrix:
    baseline: A0
    changes:
      A1-bf16-kv: {kv-cache-dtype: auto}
      A2-no-mtp: {max-num-seqs: 1}
      B2-util-0.94: {gpu-memory-utilization: 0.94}
      C9-crash: {max-num-batched-tokens: 999999}
      D1-same: {max-num-seqs: 3}
"""

DECODE = {"A0": 71.0, "A1-bf16-kv": 85.0, "A2-no-mtp": 47.5, "B2-util-0.94": 86.0, "D1-same": 71.4}
HEADROOM = {"A0": 6.7, "A1-bf16-kv": 7.8, "A2-no-mtp": 7.1, "B2-util-0.94": 4.7, "D1-same": 6.6}


def experiment():
    return parse_experiment(EXPERIMENT)


def records(repeats: int = 3, seed: int = 1) -> list[VariantRecord]:
    exp = experiment()
    base = EngineConfig(engine="vllm", model=exp.engine.model, flags=exp.engine.flags)
    variants = matrix_variants(base, ClientSpec(), exp.variants.matrix)
    rng = random.Random(seed)
    out = []
    for position, v in enumerate(variants):
        if v.name == "C9-crash":
            out.append(
                VariantRecord(
                    variant=v,
                    position=position,
                    status="failed",
                    failure=Failure(klass="oom_at_startup", excerpt="torch.OutOfMemoryError: CUDA out of memory"),
                )
            )
            continue
        runs = []
        for r in range(repeats):

            def jitter(x):
                return x * (1 + rng.uniform(-0.01, 0.01))

            tok = jitter(DECODE[v.name])
            runs.append(
                RunResult(
                    variant_key=v.key(),
                    probe="decode_speed",
                    repeat=r,
                    wall_s=7.0,
                    result=ProbeResult(probe="decode_speed", figures={"output_tok_s": tok}, requests=1),
                )
            )
            runs.append(
                RunResult(
                    variant_key=v.key(),
                    probe="short_latency",
                    repeat=r,
                    wall_s=1.0,
                    result=ProbeResult(
                        probe="short_latency", figures={"e2el_ms": jitter(580.0 * 71 / DECODE[v.name])}, requests=1
                    ),
                )
            )
            runs.append(
                RunResult(
                    variant_key=v.key(),
                    probe="memory_headroom",
                    repeat=r,
                    wall_s=0.1,
                    result=ProbeResult(probe="memory_headroom", figures={"headroom_pct": HEADROOM[v.name]}),
                )
            )
            points = [
                {
                    "concurrency": c,
                    "output_tok_s": jitter(tok * c * 0.9),
                    "ttft_p99_ms": jitter(300.0 * c),
                    "tpot_p99_ms": jitter(1000 / tok * (1 + 0.2 * c)),
                }
                for c in (1, 2, 4)
            ]
            runs.append(
                RunResult(
                    variant_key=v.key(),
                    probe="load_curve",
                    repeat=r,
                    wall_s=20.0,
                    result=ProbeResult(
                        probe="load_curve",
                        points=points,
                        requests=48,
                        figures={"goodput_rps": jitter(1.5), "max_output_tok_s": points[-1]["output_tok_s"]},
                    ),
                )
            )
        out.append(VariantRecord(variant=v, position=position, status="done", runs=runs, launch_s=240.0))
    return out
