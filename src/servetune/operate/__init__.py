"""operate room: `servetune serve` and `servetune deploy` (issue 10): an engine run under supervision behind nginx,
and the deployment files sized from the same measurements.

Entry points: `Supervisor(ServeOptions(...))`, `write_deployment(DeployInputs(...))`, `load_source` (`Source`),
`serve_sizing`, `plan_fallback`, `blue_green` and `request_switch`, `EventLog` / `read_events`.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.operate.control import request_switch as request_switch
    from servetune.operate.deploy import (
        TARGETS as TARGETS,
        DeployInputs as DeployInputs,
        write_deployment as write_deployment,
    )
    from servetune.operate.events import EventLog as EventLog, read_events as read_events
    from servetune.operate.evidence import Evidence as Evidence, Sized as Sized
    from servetune.operate.fallback import (
        Fallback as Fallback,
        given_fallback as given_fallback,
        plan_fallback as plan_fallback,
    )
    from servetune.operate.sizing import ServeSizing as ServeSizing, serve_sizing as serve_sizing
    from servetune.operate.source import (
        Source as Source,
        load_source as load_source,
        load_tuning_folder as load_tuning_folder,
    )
    from servetune.operate.supervisor import ServeOptions as ServeOptions, Supervisor as Supervisor
    from servetune.operate.switch import SwitchOptions as SwitchOptions, blue_green as blue_green
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "DeployInputs": "deploy",
            "EventLog": "events",
            "Evidence": "evidence",
            "Fallback": "fallback",
            "ServeOptions": "supervisor",
            "ServeSizing": "sizing",
            "Sized": "evidence",
            "Source": "source",
            "Supervisor": "supervisor",
            "SwitchOptions": "switch",
            "TARGETS": "deploy",
            "blue_green": "switch",
            "given_fallback": "fallback",
            "load_source": "source",
            "load_tuning_folder": "source",
            "plan_fallback": "fallback",
            "read_events": "events",
            "request_switch": "control",
            "serve_sizing": "sizing",
            "write_deployment": "deploy",
        },
    )
