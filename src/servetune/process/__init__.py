"""process room: process groups for engines: free ports, per-launch logs, teardown with proof, no orphans.

Entry points: `ProcessGroup` (stopped with a `TeardownReport`), `free_port`, `LogFollower`, and `group_members` /
`living` for what is left.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.process.group import ProcessGroup as ProcessGroup, TeardownReport as TeardownReport
    from servetune.process.logfollow import LogFollower as LogFollower, read_text as read_text
    from servetune.process.ports import free_port as free_port, port_in_use as port_in_use
    from servetune.process.proctable import ProcInfo as ProcInfo, group_members as group_members, living as living
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
