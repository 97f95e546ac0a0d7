"""`local-gpus`: this host's GPUs shared out in slots, so that launch groups run side by side — each in a slot
process whose CUDA_VISIBLE_DEVICES names the GPUs its launch needs (its world size, `HardwareSpec.slot_size`:
TP x PP x DP by the one placement rule), each engine on a free port of its own (`engines.launch`).

The GPUs are `--gpus` / `executor.gpus`, else CUDA_VISIBLE_DEVICES when this process has it, else every GPU NVML
sees. Ids are NVML's (PCI bus) order, so each slot gets CUDA_DEVICE_ORDER=PCI_BUS_ID too: CUDA's default order
(fastest first) could otherwise number the same GPUs differently.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from servetune.errors import ServetuneError
from servetune.tune.execution.fanout import Fanout, Handle, Job, log_path
from servetune.tune.execution.slot import Slot, SlotJob
from servetune.tune.schema.experiment import Experiment, describe_gpus, gpu_slots


def host_gpus(given: Sequence[str] | None) -> tuple[str, ...]:
    """The GPU ids to share out: as given, else CUDA_VISIBLE_DEVICES, else NVML's devices."""
    if given:
        return tuple(given)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return tuple(v.strip() for v in visible.split(",") if v.strip())
    from servetune.hardware.nvml import read_devices

    found = read_devices()
    if not found:
        raise ServetuneError(
            "executor local-gpus found no GPU (NVML lists none, CUDA_VISIBLE_DEVICES is not set)",
            "give the GPU ids with --gpus 0,1 (or executor: {kind: local-gpus, gpus: [0, 1]})",
        )
    return tuple(str(i) for i in range(len(found)))


def pick(gpus: Sequence[str], free: Collection[str], need: int, avoid: Collection[str] = ()) -> tuple[str, ...] | None:
    """The GPUs for a launch of `need`: an aligned block of neighbours (0-1, 2-3: the pairs a board wires
    together) when one is free, else any free ones; never the GPUs a lost launch ran on while the others could
    hold it (it waits for them). None while what it may use is not free."""
    usable = [g for g in gpus if g not in avoid]
    if len(usable) < need:
        usable = list(gpus)
    if need < 1 or sum(g in free for g in usable) < need:
        return None
    blocks = [tuple(gpus[i : i + need]) for i in range(0, len(gpus) - need + 1, need)]
    aligned = [b for b in blocks if all(g in free and g in usable for g in b)]
    return aligned[0] if aligned else tuple([g for g in usable if g in free][:need])


class LocalGpusExecutor(Fanout):
    """Launch groups side by side on slots of this host's GPUs."""

    def __init__(self, exp: Experiment, gpus: Sequence[str] | None = None) -> None:
        super().__init__(exp)
        self.gpus = host_gpus(gpus)
        self._free = set(self.gpus)

    def capacity(self, need: int) -> int:
        return gpu_slots(self.gpus, need)

    def describe(self, need: int) -> str:
        return describe_gpus(self.gpus)

    def claim(self, job: Job) -> tuple[str, ...] | None:
        chosen = pick(self.gpus, self._free, job.need, job.avoid)
        if chosen is not None:
            self._free -= set(chosen)
        return chosen

    def release(self, claim: tuple[str, ...]) -> None:
        self._free |= set(claim)

    def open(self, job: Job, claim: tuple[str, ...], done: dict[str, set[tuple[str, int]]]) -> Handle:
        out_dir = self._session.out_dir
        slot_job = SlotJob(self.exp, tuple(job.todo), done, out_dir, "this host", None)
        env = {"CUDA_VISIBLE_DEVICES": ",".join(claim), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        return Slot.start(slot_job, log_path(out_dir, job), env)
