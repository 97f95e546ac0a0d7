"""The suite's probes, one module each; every module registers its `ProbeSpec` (see `servetune.suite.spec`).

`servetune.suite.registry.all_probes()` imports every module of this package, so a new probe is a new module here
(and its test), nothing else. A probe is reached through the registry (`servetune.suite.registry.get_probe(name)`,
`servetune.suite.run.run_probe`), never through its module.
"""
