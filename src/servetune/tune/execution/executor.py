"""Executors run launch groups (each a `LaunchSession` of one engine start), as AIPerf's executors run its plan:
the loop submits groups and waits for them, and never knows where they ran.

- `local` (`tune.local`): one group at a time, in this process, writing the store itself;
- `local-gpus` (`tune.local_gpus`): groups side by side on slots of this host's GPUs;
- `ray` (`tune.ray_executor`): each group a Ray task on a node with the GPUs (or the custom resource) it needs;
- `replay` (`tune.replay`): nothing launched, every group answered from a measured table.

The concurrent two run each group in a slot process that relays every call back here (`tune.relay`): the store
has one writer, and every finished probe run is stored as it finishes, wherever it ran. Ray is imported by its
executor only, when one is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from servetune.tune.execution.local import LocalExecutor
from servetune.tune.execution.session import LaunchSession
from servetune.tune.results.store import Store
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant


class Executor(Protocol):
    """Runs submitted launch groups, as many at once as it has room for."""

    def bind(self, session: LaunchSession, store: Store) -> None:
        """The driver's session (experiment, folder, progress) and the store the runs are recorded in."""

    def has_room(self) -> bool:
        """True while fewer groups are submitted and unfinished than it can run at once (a search asks for
        another trial only then: several trials in flight on a cluster, one at a time here)."""

    def submit(self, group: Sequence[Variant]) -> None:
        """Queues a launch group; it starts as soon as there is room for it, in submission order."""

    def wait(self) -> list[Variant] | None:
        """Runs until one submitted group is over (its runs stored) and returns it; None when none is left."""

    def close(self) -> None:
        """Stops whatever still runs (an interrupted run) and forgets what is queued."""


def executor_for(exp: Experiment) -> Executor:
    """The executor `exp.executor` names (the Ray one connects to its cluster here)."""
    spec = exp.executor
    if spec.kind == "local-gpus":
        from servetune.tune.execution.local_gpus import LocalGpusExecutor

        return LocalGpusExecutor(exp, spec.gpus)
    if spec.kind == "ray":
        from servetune.load.transport import require_ray

        require_ray("executor ray")
        from servetune.tune.execution.ray_executor import RayExecutor

        return RayExecutor(exp, spec.address, spec.resource)
    if spec.kind == "replay":
        from servetune.tune.execution.replay import ReplayExecutor

        assert spec.table is not None  # the schema asks for it
        return ReplayExecutor(exp, spec.table, spec.seed)
    return LocalExecutor()
