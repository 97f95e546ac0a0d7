"""Process-group lifecycle for engines: free ports, per-launch logs, teardown with proof, no orphans.

`ProcessGroup` starts a command as its own group and stops it with a `TeardownReport`; `free_port` /
`port_in_use`; `LogFollower` / `read_text` read its log; `group_members` / `living` (`ProcInfo`) list what is left.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.process.group import ProcessGroup as ProcessGroup
    from servetune.process.group import TeardownReport as TeardownReport
    from servetune.process.logfollow import LogFollower as LogFollower
    from servetune.process.logfollow import read_text as read_text
    from servetune.process.ports import free_port as free_port
    from servetune.process.ports import port_in_use as port_in_use
    from servetune.process.proctable import ProcInfo as ProcInfo
    from servetune.process.proctable import group_members as group_members
    from servetune.process.proctable import living as living
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "LogFollower": "logfollow",
            "ProcInfo": "proctable",
            "ProcessGroup": "group",
            "TeardownReport": "group",
            "free_port": "ports",
            "group_members": "proctable",
            "living": "proctable",
            "port_in_use": "ports",
            "read_text": "logfollow",
        },
    )
