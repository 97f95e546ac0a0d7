"""suite room: the probes a server is measured with.

Each probe is a `ProbeSpec` (its `Figure`s, its parameters) in the registry (`all_probes`, `get_probe`,
`figure_spec`, `named_objectives`; one module each in `probes`); `Probes` says which a suite runs. `run_probe(spec,
ProbeContext, params) -> ProbeResult` runs one (`to_simulated_time` for a time-scaled simulator), and
`check_server` / `passed` is the acceptance probe on a running server (`servetune check`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.suite.check import check_server as check_server
    from servetune.suite.check import passed as passed
    from servetune.suite.params import Probes as Probes
    from servetune.suite.result import ProbeResult as ProbeResult
    from servetune.suite.run import run_probe as run_probe
    from servetune.suite.run import to_simulated_time as to_simulated_time
    from servetune.suite.spec import (
        Figure as Figure,
    )
    from servetune.suite.spec import (
        ProbeContext as ProbeContext,
    )
    from servetune.suite.spec import (
        ProbeSpec as ProbeSpec,
    )
    from servetune.suite.spec import (
        all_probes as all_probes,
    )
    from servetune.suite.spec import (
        figure_spec as figure_spec,
    )
    from servetune.suite.spec import (
        get_probe as get_probe,
    )
    from servetune.suite.spec import (
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
        },
    )
