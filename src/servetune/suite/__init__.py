"""suite room: the probes a server is measured with, each defined once in the registry.

Entry points: `get_probe(name) -> ProbeSpec` / `all_probes()`, `run_probe(spec, ProbeContext(backend), params) ->
ProbeResult`, `Probes` (which a suite runs), and `check_server` (`servetune check`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.suite.check import check_server as check_server, passed as passed
    from servetune.suite.params import Probes as Probes
    from servetune.suite.requests import warm_up as warm_up
    from servetune.suite.result import ProbeResult as ProbeResult
    from servetune.suite.run import run_probe as run_probe, to_simulated_time as to_simulated_time
    from servetune.suite.spec import (
        Figure as Figure,
        ProbeContext as ProbeContext,
        ProbeSpec as ProbeSpec,
        all_probes as all_probes,
        figure_spec as figure_spec,
        get_probe as get_probe,
        named_objectives as named_objectives,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Figure": "spec",
            "ProbeContext": "spec",
            "ProbeResult": "result",
            "ProbeSpec": "spec",
            "Probes": "params",
            "all_probes": "spec",
            "check_server": "check",
            "figure_spec": "spec",
            "get_probe": "spec",
            "named_objectives": "spec",
            "passed": "check",
            "run_probe": "run",
            "to_simulated_time": "run",
            "warm_up": "requests",
        },
    )
