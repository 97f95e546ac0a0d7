"""The suite's probes, one module each; every module registers its `ProbeSpec` (see `servetune.suite.spec`).

`servetune.suite.spec.all_probes()` imports every module of this package, so a new probe is a new module here
(and its test), nothing else.
"""
