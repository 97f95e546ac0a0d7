"""`ray`: each launch group a Ray task on a node of an existing cluster, asking for the GPUs its launch occupies
(`num_gpus`, or a custom resource on CPU-only clusters: `executor.resource`), so Ray does the placement, the
resource accounting and the transport, not servetune.

On its node the task starts a slot process (`tune.slot`): the engine launches there, the probes run from there
(the network between the driver and the node does not bias a latency), and every message of its session streams
back through the task's generator as it happens, the driver recording each finished run in its store. Engine
logs come back at the end of the group (nodes need not share the experiment folder); engines and models must be
at the same paths on every node, with servetune[ray] installed there at the same version.

A stream that ends early ends with `Lost`: `node_lost` when the task's node is gone, else `task_lost`. Which error
Ray raises when a node dies depends on what its owner learns first (`NodeDiedError` when the dead raylet fails to
say why the worker died, `WorkerCrashedError` or a relayed end of the slot when the worker's own end comes first),
so the class is decided by asking about the node itself, not by the error's type: gone when Ray counts it dead or
when its raylet takes no connection (the port of a killed raylet closes with its process; Ray's health checks say
so only after several periods). The base records the cause and retries the group once on another node
(`NodeAffinitySchedulingStrategy`, when one has room), so Ray's own task retries are off (`max_retries=0`: a
streaming task retried by Ray would replay its messages).
A driver that dies takes its tasks with it (Ray kills an owner's tasks; the slot and its engine die with the
task's worker), and `tune --resume` starts over from the store: no finished run is repeated.
"""

from __future__ import annotations

import contextlib
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import NodeDiedError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from servetune.load.ray_transport import alive_nodes, connect, first_line, node_name
from servetune.tune.execution.fanout import Fanout, Handle, Job, log_path
from servetune.tune.execution.relay import End, Logs, Lost, Message, Placed
from servetune.tune.execution.slot import Slot, SlotJob
from servetune.tune.schema.experiment import Experiment
from servetune.tune.schema.variants import Variant

LOG_TAIL_BYTES = 4 * 2**20
"""Of an engine log bigger than this, the end comes back to the driver (where a failure's proof is)."""
RAYLET_CONNECT_S = 5.0
"""A raylet that does not take a TCP connection within this is unreachable: its node is lost (a live raylet's
kernel accepts at once, however busy the process)."""


def gone_node(node_id: str) -> str | None:
    """The address of node `node_id` when it is gone (Ray counts it dead, or its raylet takes no connection); None
    while it lives, or when the cluster does not know it."""
    entry = next((n for n in ray.nodes() if n.get("NodeID") == node_id), None)
    if entry is None:
        return None
    address = str(entry["NodeManagerAddress"])
    if not entry.get("Alive"):
        return address
    try:
        with socket.create_connection((address, int(entry["NodeManagerPort"])), timeout=RAYLET_CONNECT_S):
            return None
    except OSError:
        return address


def _logs(root: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted((root / "logs").rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                handle.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
                files[str(path.relative_to(root))] = handle.read()
    return files


@ray.remote(max_retries=0)
def run_group(
    exp: Experiment, group: tuple[Variant, ...], done: dict[str, set[tuple[str, int]]], slot_log: str
) -> Iterator[Message]:
    """The Ray task of one launch group, on its node: a slot process, its messages streamed back, the logs last."""
    node = ray.get_runtime_context().get_node_id()
    with tempfile.TemporaryDirectory(prefix="servetune-slot-") as tmp:
        root = Path(tmp)
        slot = Slot.start(SlotJob(exp, group, done, root, f"ray node {node_name(node)}", node), root / slot_log)
        try:
            for message in slot.messages():
                if isinstance(message, End | Lost):
                    yield Logs(_logs(root))
                yield message
        finally:
            slot.stop()


class _Task:
    """A running `run_group` task, seen from the driver (a feeder thread drains its messages)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.node: str | None = None
        """The node the slot runs on, once its `Placed` came."""

    def messages(self) -> Iterator[Message]:
        try:
            for ref in self.stream:
                message = ray.get(ref)
                if isinstance(message, Placed):
                    self.node = message.node
                yield self._lost(message.cause) if isinstance(message, Lost) else message
        except NodeDiedError as err:  # Ray's own word (the owner learnt it from the node's raylet): no need to ask
            yield Lost("node_lost", first_line(err))
        except RayError as err:
            yield self._lost(first_line(err))

    def _lost(self, cause: str) -> Lost:
        """`node_lost` when the slot's node is gone (whichever of its ends reached the driver first), else
        `task_lost`."""
        address = gone_node(self.node) if self.node else None
        if address is None:
            return Lost("task_lost", cause)
        return Lost("node_lost", f"ray node {address} is gone: {cause}")

    def stop(self) -> None:
        with contextlib.suppress(RayError):  # over already, or its node gone: nothing left to cancel
            ray.cancel(self.stream)


class RayExecutor(Fanout):
    """Launch groups as Ray tasks, one per group, each asking for the `resource` its launch occupies."""

    def __init__(self, exp: Experiment, address: str | None, resource: str = "GPU") -> None:
        super().__init__(exp)
        self.resource = resource
        self._connected = connect(address)

    def _amounts(self) -> list[tuple[str, float]]:
        return [(n.id, n.resources.get(self.resource, 0.0)) for n in alive_nodes()]

    def capacity(self, need: int) -> int:
        return sum(int(amount // max(1, need)) for _, amount in self._amounts())

    def describe(self, need: int) -> str:
        nodes = ", ".join(f"{node_name(node)}: {amount:g}" for node, amount in self._amounts())
        return f"no node of the Ray cluster has {need} {self.resource} ({nodes or 'no node'})"

    def claim(self, job: Job) -> tuple[str, ...] | None:
        """Anywhere (Ray queues the task until a node has room), except after a loss: a node other than the
        one lost, with enough of the resource, when the cluster has one."""
        if not job.avoid:
            return ()
        others = [node for node, amount in self._amounts() if node not in job.avoid and amount >= job.need]
        return (others[0],) if others else ()

    def open(self, job: Job, claim: tuple[str, ...], done: dict[str, set[tuple[str, int]]]) -> Handle:
        options: dict[str, Any] = {"max_retries": 0}
        if self.resource == "GPU":
            options["num_gpus"] = job.need
        else:
            options["resources"] = {self.resource: job.need}
        if claim:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(claim[0], soft=False)
        slot_log = str(log_path(Path("."), job))
        return _Task(run_group.options(**options).remote(self.exp, tuple(job.todo), done, slot_log))

    def close(self) -> None:
        super().close()
        if self._connected:
            ray.shutdown()
