"""Operate: `servetune serve` and `servetune deploy` (issue 10).

An engine config runs under supervision behind a real nginx: readiness by the acceptance probe, liveness by a
real one-token generation with a deadline, deaths classified from the engine's log, restarts with exponential
backoff, a planned fallback profile after a crash loop, blue-green switches without a lost request, graceful
drain on SIGTERM. The same measurements size the files `servetune deploy` writes (nginx, Prometheus rules and
scrape config, a Grafana dashboard, docker compose, Kubernetes, systemd), each number with where it came from.

Entry points: `Supervisor(ServeOptions(...))`, `write_deployment(DeployInputs(...))`, `load_source` /
`load_tuning_folder` (a `Source`: config + `Evidence`), `serve_sizing` (`ServeSizing` of `Sized` numbers),
`plan_fallback` / `given_fallback` (`Fallback`), `blue_green` (`SwitchOptions`) and `request_switch`, `EventLog` /
`read_events`.

Modules, one idea each: `events` (JSONL event log), `secrets` (redaction), `metrics` (the supervisor's own
Prometheus series), `commands` and `acceptance` (the two spine seams: engine command line and acceptance probe),
`liveness`, `proxy` (nginx config + process), `source` (configs and measurements from a tuning folder, a file or
a command line), `sizing` (every derived number with its source), `fallback`, `supervisor`, `switch`, `control`
(the supervisor's HTTP face), `alerts`, `deploy`.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.operate.control import request_switch as request_switch
    from servetune.operate.deploy import DeployInputs as DeployInputs
    from servetune.operate.deploy import write_deployment as write_deployment
    from servetune.operate.events import EventLog as EventLog
    from servetune.operate.events import read_events as read_events
    from servetune.operate.evidence import Evidence as Evidence
    from servetune.operate.evidence import Sized as Sized
    from servetune.operate.fallback import (
        Fallback as Fallback,
    )
    from servetune.operate.fallback import (
        given_fallback as given_fallback,
    )
    from servetune.operate.fallback import (
        plan_fallback as plan_fallback,
    )
    from servetune.operate.sizing import ServeSizing as ServeSizing
    from servetune.operate.sizing import serve_sizing as serve_sizing
    from servetune.operate.source import (
        Source as Source,
    )
    from servetune.operate.source import (
        load_source as load_source,
    )
    from servetune.operate.source import (
        load_tuning_folder as load_tuning_folder,
    )
    from servetune.operate.supervisor import ServeOptions as ServeOptions
    from servetune.operate.supervisor import Supervisor as Supervisor
    from servetune.operate.switch import SwitchOptions as SwitchOptions
    from servetune.operate.switch import blue_green as blue_green
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
