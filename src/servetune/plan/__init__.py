"""plan room: vLLM's memory ledger, feasibility, roofline speed and flags, for a model on a GPU.

`api.plan_for` is the entry point. The parts: `inputs` (vLLM flags -> typed inputs), `versions` (what changes
between vLLM 0.11 and 0.33), `defaults` (GPU-dependent batch limits), `rules` (hardware and parallelism
rules), `memory` (weights per GPU, modelled overhead), `kvcache` (pages, blocks, groups, capacity lines,
exact), `fixes`, `roofline` and `speeds`, `command` (`vllm serve` / `docker run`), `calibrate` (against a
real startup log), `render` (tables), `seeds`/`demo` (the field-report systems).
"""
