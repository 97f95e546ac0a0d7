"""The suite's probes, one module each; every module registers its `ProbeSpec` (see `servetune.suite.spec`).

`servetune.suite.spec.all_probes()` imports every module of this package, so a new probe is a new module here
(and its test), nothing else. The package offers no names of its own: a probe is reached through the registry
(`servetune.suite.get_probe(name)`, `servetune.suite.run_probe`), never through its module.
"""

from servetune._exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {})
