"""The small `engine: sim` experiment several CLI tests run: two variants, two short probes, seconds on the
simulator."""

from __future__ import annotations


def sim_experiment(name: str, description: str | None = None) -> str:
    """The experiment file's text, named `name` (and described, when given)."""
    about = f"description: {description}\n" if description else ""
    return f"""\
name: {name}
{about}engine:
  engine: sim
  model: qwen3.5-4b
  startup_timeout_s: 60
  flags: {{gpu: L40S, time-scale: 50, max-model-len: 8192, max-num-seqs: 8}}
hardware: {{gpu: L40S, count: 1}}
suite:
  repeats: 1
  warmup_requests: 1
  probes:
    short_latency: {{prompt: "hi", max_tokens: 16}}
    decode_speed: {{output_tokens: 64}}
objective: decode_tok_s
variants:
  matrix:
    baseline: base
    changes:
      seqs-4: {{max-num-seqs: 4}}
"""
