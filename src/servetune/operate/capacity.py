"""Whether an engine fits on its device beside the engines serve already runs there: the one memory rule of
`servetune serve`, used before every start that is not the first — a blue-green switch (green beside blue), the
restart after a crash and the fallback profile (each beside the other roles' engines).

The device, and what an engine takes of it:

- **vLLM on GPUs** (per GPU): vLLM's budget is a fraction of the whole GPU, `ceil(total x gpu_memory_utilization)`
  (`request_memory`), and vLLM refuses to start when less than that is free ("Free memory on device ... is less
  than desired GPU memory utilization"): blue at the default 0.92 leaves 0.08 of the GPU, so green fits beside it
  only when one of them was given a share. Beyond its budget an engine holds its CUDA context and the CUDA-graph
  pool's excess over vLLM's estimate (`OUTSIDE_BUDGET_BYTES`). A running engine's KV capacity is what its startup
  log says; a new one's is the planner's (`plan.api.plan_for`), calibrated on blue's logged KV memory when green
  differs from blue only in flags that leave the non-KV memory alone. Free memory is NVML's when it can be read
  (it sees every process, a dying one's too), else the GPU's total less the footprints of serve's engines.
- **vLLM's CPU build and llama.cpp**: host RAM. A running engine holds what its process group's PSS says
  (measured). A new vLLM CPU engine holds what a running one of the same model measured, its KV space exchanged
  for the new one's (`VLLM_CPU_KVCACHE_SPACE` / `--kv-cache-memory-bytes`), else its model files + its KV space +
  `VLLM_CPU_RUNTIME_BYTES`. A llama.cpp server's memory grows as it serves (its prompt cache fills, up to
  `--cache-ram`), so it is planned at its bound, running or not (`llamacpp_bytes`: model file + KV cache from the
  GGUF's shapes + `--cache-ram` + `LLAMACPP_RUNTIME_BYTES`; its PSS when that is larger); its GPU offload
  (`--n-gpu-layers`) is not planned. Free memory is the kernel's MemAvailable less `HOST_RESERVE_FRACTION`.
- **SGLang**, and a GPU whose model serve cannot tell (no NVML, no `--gpu`): not planned; the plan says why.

`--memory-limit-gib` caps what serve's engines may hold together (per GPU, or of host RAM). A switch then:
fits side by side (green starts beside blue: no unavailability), or drains and replaces (blue stops first; the
expected unavailability is green's measured start time, `operate/starts.py`), or is refused with the fix (green
cannot fit even alone, or the drain's worst case exceeds `--max-unavailable-s`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.engines.launch import RunningEngine
from servetune.engines.registry import adapter_for
from servetune.engines.vllm import COMPILE_NEUTRAL_FLAGS, is_cpu_build
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GiB, GPUSpec, custom_gpu, get_gpu
from servetune.hardware.host import host_memory
from servetune.hardware.nvml import match_catalog, read_devices
from servetune.model.gguf_shape import kv_bytes_per_token
from servetune.operate.fallback import set_flag
from servetune.operate.sizing import COLD_START_HEADROOM
from servetune.operate.starts import StartEstimate
from servetune.plan.api import Plan, plan_for
from servetune.process.proctable import group_pss_bytes

OUTSIDE_BUDGET_BYTES = GiB
"""What a vLLM engine holds on each GPU beyond its gpu-memory-utilization budget: its CUDA context (0.51 GiB: "Free
memory on device (139.29/139.8 GiB) on startup" before anything else ran, vLLM 0.24.0 on the H200) and the
CUDA-graph pool's excess over the estimate vLLM subtracted (0.16 GiB: "CUDA graph pool memory: 0.91 GiB (actual),
0.75 GiB (estimated)"), rounded up (benchmarks/tuning_table/data/*/vllm.log.gz)."""
VLLM_CPU_RUNTIME_BYTES = int(1.5 * GiB)
"""A vLLM CPU engine's memory besides its weights and KV space, when no engine of the same model was measured:
its API server, engine core and worker processes held 2.45 GiB of PSS with a 1 GiB KV space and the 14 MiB tiny
model (vLLM CPU 0.32.0, 2 cores), rounded up."""
LLAMACPP_RUNTIME_BYTES = 64 * 1024**2
"""A llama.cpp server's memory besides its model file, KV cache and prompt cache (compute buffers, threads, the
HTTP server): the tiny model's server held 0.054 GiB of PSS at rest, of which 14 MiB file and 16 MiB KV; rounded
up."""
LLAMACPP_CACHE_RAM_MIB = 8192
"""llama-server's default `--cache-ram`: its prompt cache in host RAM, filled as prompts are served."""
HOST_RESERVE_FRACTION = 0.05
"""Of host RAM kept free for everything else on the host: MemAvailable moves with other programs' use."""
SAME_OVERHEAD_IGNORES = COMPILE_NEUTRAL_FLAGS | {"max-model-len", "kv-cache-dtype"}
"""Flags that change a vLLM engine's KV cache but not the memory it holds besides (weights, activations of the
profiling run, CUDA graphs): a green that differs from blue only in these has blue's measured non-KV memory."""

Decision = Literal["side_by_side", "drain_and_replace", "refuse", "unplanned"]
GateDecision = Literal["start", "wait", "refuse", "unplanned"]


class DeviceChoice(BaseModel):
    """What the user said of the device: `--gpu` (else NVML's name, or a tuning folder's), `--gpus` (else the
    config's parallelism), `--memory-limit-gib`."""

    model_config = ConfigDict(frozen=True)

    gpu: str | None = None
    gpus: int | None = None
    limit_gib: float | None = None


class Device(BaseModel):
    """Where an engine's memory is: one kind of GPU (figures per GPU) or this host's RAM."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["gpu", "host"]
    name: str
    gpu: GPUSpec
    """The planner's view of the device (host RAM: a GPU-shaped stand-in with the host's memory)."""
    gpus: int = 1
    total_bytes: int
    free_bytes: int | None = None
    """Measured now (the least free of the engine's GPUs, or MemAvailable less the reserve); None: not measurable."""
    limit_bytes: int | None = None
    """`--memory-limit-gib`: what serve's engines may hold together."""
    source: str

    @property
    def cap_bytes(self) -> int:
        """The most serve's engines may hold together."""
        return min(self.total_bytes, self.limit_bytes) if self.limit_bytes else self.total_bytes

    def text(self) -> str:
        each = " each" if self.kind == "gpu" and self.gpus > 1 else ""
        free = f"; {_gib(self.free_bytes)} free now" if self.free_bytes is not None else ""
        limit = f"; serve's engines limited to {_gib(self.limit_bytes)}" if self.limit_bytes else ""
        return f"{self.name} ({_gib(self.total_bytes)}{each}{free}{limit}; {self.source})"


class Footprint(BaseModel):
    """What one engine holds (measured) or will hold (predicted) on its device, and the KV capacity it keeps."""

    model_config = ConfigDict(frozen=True)

    label: str
    bytes: int
    """What it holds (running) or will hold once started."""
    how: str
    peak_bytes: int | None = None
    """What it may grow to as it serves (llama.cpp's prompt cache fills up to --cache-ram); None: `bytes`."""
    utilization: float | None = None
    kv_tokens: int | None = None
    kv_tokens_range: tuple[int, int] | None = None
    max_concurrency: float | None = None
    max_model_len: int | None = None
    kv_source: str | None = None
    problem: str | None = None
    """Why it cannot run on this device even alone (the planner's verdict), else None."""
    fixes: list[str] = []

    @property
    def most_bytes(self) -> int:
        return self.peak_bytes if self.peak_bytes is not None else self.bytes

    def text(self) -> str:
        util = f"gpu-memory-utilization {self.utilization:g}: " if self.utilization is not None else ""
        kv = ""
        if self.kv_tokens is not None:
            spread = ""
            if self.kv_tokens_range and self.kv_tokens_range[0] != self.kv_tokens_range[1]:
                spread = f" ({self.kv_tokens_range[0]:,}-{self.kv_tokens_range[1]:,})"
            conc = (
                f", {self.max_concurrency:.2f}x at {self.max_model_len:,} tokens"
                if self.max_concurrency is not None and self.max_model_len
                else ""
            )
            kv = f"; KV cache {self.kv_tokens:,} tokens{spread}{conc} ({self.kv_source})"
        grows = f", up to {_gib(self.peak_bytes)} as it serves" if self.peak_bytes is not None else ""
        return f"{self.label}: {util}{_gib(self.bytes)}{grows} ({self.how}){kv}"


class SwitchPlan(BaseModel):
    """What a switch will do about memory, and why; `lines()` is what `serve --switch NEW --check` prints."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    reason: str
    device: Device | None = None
    blue: Footprint | None = None
    others: list[Footprint] = []
    green: Footprint | None = None
    room_beside_bytes: int | None = None
    room_alone_bytes: int | None = None
    start: StartEstimate | None = None
    unavailable_s: float | None = None
    """Expected time without a ready engine (drain-and-replace only: green's expected start)."""
    unavailable_bound_s: float | None = None
    """Its worst case: blue's drain + its stop + COLD_START_HEADROOM x green's expected start (else the startup
    timeout)."""
    max_unavailable_s: float = 0.0
    fixes: list[str] = []
    notes: list[str] = []

    @property
    def proceeds(self) -> bool:
        return self.decision != "refuse"

    def lines(self) -> list[str]:
        head = {
            "side_by_side": "fits side by side",
            "drain_and_replace": "drain and replace",
            "refuse": "refused",
            "unplanned": "not planned",
        }[self.decision]
        out = [f"switch plan: {head}" + (f" on {self.device.text()}" if self.device else "")]
        for fp in [self.blue, *self.others, self.green]:
            if fp is not None:
                out.append(f"  {fp.text()}")
        if self.room_beside_bytes is not None and self.green is not None:
            alone = f"; with blue stopped {_gib(self.room_alone_bytes)}" if self.room_alone_bytes is not None else ""
            out.append(f"  room for green beside blue: {_gib(self.room_beside_bytes)}{alone}")
        shown = self.decision == "drain_and_replace" or self.unavailable_bound_s is not None
        if self.start is not None and shown and self.start.seconds:
            expect = f", {self.start.expect} compile cache expected" if self.start.expect else ""
            out.append(f"  green's start: {self.start.seconds:.1f} s ({self.start.basis}{expect})")
        if self.unavailable_bound_s is not None:
            expected = f"about {self.unavailable_s:.0f} s, " if self.unavailable_s is not None else ""
            out.append(
                f"  unavailable while no engine serves: {expected}at most {math.ceil(self.unavailable_bound_s)} s "
                f"(allowed: --max-unavailable-s {self.max_unavailable_s:g})"
            )
        out.append(f"  → {self.reason}")
        out += [f"  fix: {fix}" for fix in self.fixes]
        out += [f"  note: {note}" for note in self.notes]
        return out


class StartGate(BaseModel):
    """Whether a restart or a fallback start may go ahead now: `start`; `wait` (on a GPU, the memory it needs is
    held by something serve does not run: a killed engine's, which the driver releases late, another program's;
    host RAM comes back when the dead engine is reaped); `refuse` (it cannot fit, as it grows, in what serve may
    use beside its other engines); or `unplanned`."""

    model_config = ConfigDict(frozen=True)

    decision: GateDecision
    reason: str
    need: Footprint | None = None
    room_bytes: int | None = None


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GiB:.2f} GiB"


# ---- the device ------------------------------------------------------------------------------------------------
def engine_gpus(cfg: EngineConfig) -> int:
    """GPUs one engine of `cfg` occupies (tensor x pipeline x data parallel)."""
    flags = cfg.flags
    n = 1
    for key in ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size"):
        value = flags.get(key)
        n *= int(value) if isinstance(value, int | str) and str(value).isdigit() and int(value) > 0 else 1
    return n


def device_for(cfg: EngineConfig, choice: DeviceChoice) -> Device | str:
    """The device `cfg` runs on, measured now; a string saying why it cannot be planned. `choice.gpus` counts for
    a config that does not set its own tensor parallelism."""
    gpu, limit = choice.gpu, int(choice.limit_gib * GiB) if choice.limit_gib else None
    flags = cfg.flags
    gpus = None if "tensor-parallel-size" in flags else choice.gpus
    if cfg.engine == "llamacpp" or (cfg.engine == "vllm" and is_cpu_build()):
        host = host_memory()
        return Device(
            kind="host",
            name="host RAM",
            gpu=custom_gpu(host.total_bytes / GiB, 20, 0.2, name="host RAM"),
            total_bytes=host.total_bytes,
            free_bytes=max(0, host.available_bytes - int(HOST_RESERVE_FRACTION * host.total_bytes)),
            limit_bytes=limit,
            source=f"/proc/meminfo MemAvailable less {HOST_RESERVE_FRACTION:.0%} kept for the host",
        )
    if cfg.engine != "vllm":
        return f"{cfg.engine}'s memory use is not modelled (servetune plans vLLM on GPUs and CPU engines on host RAM)"
    count = gpus or engine_gpus(cfg)
    readings = read_devices()
    spec: GPUSpec | None = get_gpu(gpu) if gpu else None
    if spec is None and readings:
        spec = match_catalog(readings[0].name, None)
    if spec is None:
        why = f"NVML names it {readings[0].name!r}, not in the catalog" if readings else "NVML cannot be read here"
        return f"the GPU is unknown ({why}): give --gpu NAME"
    free: int | None = None
    source = f"catalog ({spec.name}); free memory not measurable (no NVML): serve's own engines assumed the only ones"
    if readings:
        # vLLM's budget base is the total CUDA reports (the catalog's); NVML's total adds memory the driver keeps.
        # What is free to CUDA is that total less what NVML counts as used (the driver's reserve included).
        used = [r.used_bytes for r in readings[: max(1, count)]]
        free = max(0, spec.memory_bytes - max(used))
        source = f"NVML: {readings[0].name}, the least free of {len(used)} GPU(s)"
    return Device(
        kind="gpu",
        name=f"{count}x {spec.name}",
        gpu=spec,
        gpus=count,
        total_bytes=spec.memory_bytes,
        free_bytes=free,
        limit_bytes=limit,
        source=source,
    )


# ---- what an engine holds, and will hold ---------------------------------------------------------------------
def held(engine: RunningEngine, device: Device, label: str) -> Footprint:
    """What a running engine holds: measured on host RAM (its process group's PSS); on a GPU, vLLM's budget for
    its utilisation plus what it holds outside it. Its KV capacity is its startup log's."""
    facts = engine.facts
    kv = facts.kv_cache_tokens or facts.n_ctx
    conc = facts.max_concurrency if facts.max_concurrency is not None else facts.n_slots
    common: dict[str, Any] = {
        "label": label,
        "kv_tokens": kv,
        "kv_tokens_range": (kv, kv) if kv else None,
        "max_concurrency": float(conc) if conc is not None else None,
        "max_model_len": facts.max_model_len or facts.n_ctx_per_slot,
        "kv_source": f"{engine.cfg.engine} startup log" if kv else None,
    }
    if device.kind == "host":
        if engine.group is None:  # an attached server: not serve's to measure
            return Footprint(bytes=0, how="not measured: a server serve did not start", **common)
        pss = group_pss_bytes(engine.group.pgid)
        planned = llamacpp_bytes(engine.cfg) if engine.cfg.engine == "llamacpp" else None
        if isinstance(planned, tuple) and planned[0] > pss:  # not all its KV cache touched yet: the plan bounds it
            return Footprint(bytes=planned[0], how=f"{planned[2]}; PSS now {_gib(pss)}", **common)
        return Footprint(bytes=pss, how="measured: PSS of its processes", **common)
    plan = plan_for(engine.cfg, device.gpu, device.gpus, with_fixes=False)
    return Footprint(
        bytes=plan.requested_bytes + OUTSIDE_BUDGET_BYTES,
        how=f"vLLM's budget {_gib(plan.requested_bytes)} + {_gib(OUTSIDE_BUDGET_BYTES)} outside it",
        utilization=plan.gpu_memory_utilization,
        **common,
    )


def need(cfg: EngineConfig, device: Device, label: str, like: RunningEngine | None = None) -> Footprint | str:
    """What an engine of `cfg` will hold on `device` and the KV capacity it will keep (a string: why it cannot be
    planned). `like`: a running engine of the same engine and model whose measurement calibrates the prediction."""
    same = like if like is not None and like.cfg.engine == cfg.engine and like.cfg.model == cfg.model else None
    if cfg.engine == "vllm" and device.kind == "gpu":
        return _vllm_gpu(cfg, device, label, same)
    if cfg.engine == "vllm":
        return _vllm_host(cfg, device, label, same)
    if cfg.engine == "llamacpp":
        return _llamacpp_host(cfg, device, label, same)
    return f"{cfg.engine}'s memory use is not modelled"


def _capacity(plan: Plan) -> dict[str, Any]:
    return {
        "kv_tokens": plan.kv_cache_tokens,
        "max_concurrency": round(plan.max_concurrency, 2),
        "max_model_len": plan.max_model_len,
    }


def _range(plan: Plan) -> tuple[int, int]:
    """The planner's KV tokens at the two ends of its overhead range."""
    per = plan.kv_cache_tokens / plan.max_concurrency if plan.max_concurrency else 0
    return int(plan.max_concurrency_low * per), int(plan.max_concurrency_high * per)


def _vllm_gpu(cfg: EngineConfig, device: Device, label: str, like: RunningEngine | None) -> Footprint:
    given = _calibration(cfg, device, like)
    plan = plan_for(cfg, device.gpu, device.gpus, available_kv_bytes=given)
    cannot = not plan.feasible and not any(n.startswith("borderline") for n in plan.notes)
    source = f"planner, vLLM {plan.vllm_version} ledger" + (
        ", calibrated on blue's logged KV cache memory" if given is not None else ""
    )
    return Footprint(
        label=label,
        bytes=plan.requested_bytes + OUTSIDE_BUDGET_BYTES,
        how=f"vLLM's budget {_gib(plan.requested_bytes)} + {_gib(OUTSIDE_BUDGET_BYTES)} outside it",
        utilization=plan.gpu_memory_utilization,
        kv_tokens_range=(plan.kv_cache_tokens, plan.kv_cache_tokens) if given is not None else _range(plan),
        kv_source=source,
        problem="; ".join(plan.reasons) if cannot else None,
        fixes=[str(f) for f in plan.fixes] if cannot else [],
        **_capacity(plan),
    )


def _calibration(cfg: EngineConfig, device: Device, like: RunningEngine | None) -> int | None:
    """Green's KV memory from blue's log: green's budget less blue's measured non-KV memory (blue's budget less its
    logged "Available KV cache memory"), when the two differ only in SAME_OVERHEAD_IGNORES."""
    if like is None or like.facts.available_kv_bytes is None or like.cfg.version != cfg.version:
        return None

    def rest(c: EngineConfig) -> dict[str, Any]:
        flags = c.flags
        return {k: v for k, v in flags.items() if k not in SAME_OVERHEAD_IGNORES and v is not None}

    if rest(cfg) != rest(like.cfg):
        return None
    blue = plan_for(like.cfg, device.gpu, device.gpus, with_fixes=False)
    green = plan_for(cfg, device.gpu, device.gpus, with_fixes=False)
    return green.requested_bytes - (blue.requested_bytes - like.facts.available_kv_bytes)


def vllm_cpu_kv_bytes(cfg: EngineConfig) -> int | None:
    """The KV space a vLLM CPU engine of `cfg` allocates: `--kv-cache-memory-bytes`, else VLLM_CPU_KVCACHE_SPACE
    GiB as the engine will see it (servetune's default included); None: vLLM sizes it itself."""
    flags = cfg.flags
    explicit = flags.get("kv-cache-memory-bytes")
    if isinstance(explicit, int | float | str) and str(explicit).replace(".", "", 1).isdigit():
        return int(float(explicit))
    space = adapter_for("vllm").env(cfg, "127.0.0.1").get("VLLM_CPU_KVCACHE_SPACE", "")
    return int(space) * GiB if space.isdigit() and int(space) > 0 else None


def _vllm_host(cfg: EngineConfig, device: Device, label: str, like: RunningEngine | None) -> Footprint | str:
    kv = vllm_cpu_kv_bytes(cfg)
    if kv is None:
        return "the KV space is vLLM's own choice (no VLLM_CPU_KVCACHE_SPACE, no --kv-cache-memory-bytes)"
    plan = plan_for(cfg, device.gpu, 1, available_kv_bytes=kv, with_fixes=False)
    like_kv = vllm_cpu_kv_bytes(like.cfg) if like is not None else None
    if like is not None and like_kv is not None and like.group is not None:
        pss = group_pss_bytes(like.group.pgid)
        total = max(0, pss - like_kv) + kv
        how = f"blue's measured PSS {_gib(pss)} with its KV space {_gib(like_kv)} replaced by {_gib(kv)}"
    else:
        files = _model_bytes(cfg.model)
        total = files + kv + VLLM_CPU_RUNTIME_BYTES
        how = f"model files {_gib(files)} + KV space {_gib(kv)} + {_gib(VLLM_CPU_RUNTIME_BYTES)} for vLLM itself"
    return Footprint(
        label=label,
        bytes=total,
        how=how,
        kv_tokens_range=(plan.kv_cache_tokens, plan.kv_cache_tokens),
        kv_source=f"planner, vLLM {plan.vllm_version} ledger on the KV space",
        problem="; ".join(plan.reasons) if not plan.feasible else None,
        **_capacity(plan),
    )


def _llamacpp_host(cfg: EngineConfig, device: Device, label: str, like: RunningEngine | None) -> Footprint | str:
    planned = llamacpp_bytes(cfg)
    if isinstance(planned, str):
        return planned
    start, peak, how, n_ctx = planned
    slots = _llamacpp_int(cfg, "parallel") or (like.facts.n_slots if like is not None else None)
    return Footprint(
        label=label,
        bytes=start,
        peak_bytes=peak if peak > start else None,
        how=how,
        kv_tokens=n_ctx,
        kv_tokens_range=(n_ctx, n_ctx),
        max_concurrency=float(slots) if slots else None,
        max_model_len=n_ctx // slots if slots else n_ctx,
        kv_source="the context asked for (ctx-size; llama.cpp caps a slot at the model's training context)",
    )


def llamacpp_bytes(cfg: EngineConfig) -> tuple[int, int, str, int] | str:
    """What a llama.cpp server of `cfg` holds in host RAM once started (its model file, its KV cache: the context x
    the bytes per token the GGUF's shapes give, and LLAMACPP_RUNTIME_BYTES), what it may grow to (plus its prompt
    cache's bound, `--cache-ram`, llama-server's default 8192 MiB: it fills with use), how that was added up, and
    the context; a string: why it cannot be planned."""
    n_ctx = _llamacpp_int(cfg, "ctx-size")
    if not n_ctx:
        return "llama.cpp's context is the model's own (no --ctx-size)"
    flags = cfg.flags
    types = [str(flags.get(key) or "f16") for key in ("cache-type-k", "cache-type-v")]
    per_token = kv_bytes_per_token(cfg.model, *types)
    if per_token is None:
        why = f"not a GGUF file, or cache types {types}"
        return f"the KV cache's size per token cannot be read from {cfg.model} ({why})"
    ram = flags.get("cache-ram")
    cache_mib = int(ram) if isinstance(ram, int | str) and str(ram).lstrip("-").isdigit() else LLAMACPP_CACHE_RAM_MIB
    if cache_mib < 0:
        return "--cache-ram -1 lets llama.cpp's prompt cache grow without a bound"
    files = _model_bytes(cfg.model)
    kv = n_ctx * per_token
    start = files + kv + LLAMACPP_RUNTIME_BYTES
    how = (
        f"model file {_gib(files)} + KV cache {n_ctx:,} tokens x {per_token:,} B = {_gib(kv)} + "
        f"{_gib(LLAMACPP_RUNTIME_BYTES)} for llama.cpp itself; its prompt cache adds up to {cache_mib:,} MiB "
        "(--cache-ram)"
    )
    return start, start + cache_mib * 1024**2, how, n_ctx


def _llamacpp_int(cfg: EngineConfig, key: str) -> int | None:
    """A positive integer llama.cpp flag of a config, else None."""
    value = cfg.flags.get(key)
    return int(value) if isinstance(value, int | str) and str(value).isdigit() and int(value) > 0 else None


def _model_bytes(model: str) -> int:
    """Bytes of a model's weight files on disk (a GGUF file, or a folder's *.safetensors / *.bin / *.gguf)."""
    from pathlib import Path

    path = Path(model)
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for ext in ("*.safetensors", "*.bin", "*.gguf") for p in path.glob(ext))
    return 0


# ---- the decisions ---------------------------------------------------------------------------------------------
def room(device: Device, others: list[Footprint], released: int = 0) -> int:
    """What a new engine may take beside `others`: serve's cap less what they hold, and no more than is free now
    (plus `released`: what an engine about to stop gives back)."""
    cap = device.cap_bytes - sum(o.bytes for o in others)
    if device.free_bytes is not None:
        cap = min(cap, device.free_bytes + released)
    return max(0, cap)


def decide_switch(
    device: Device,
    blue: Footprint | None,
    others: list[Footprint],
    green: Footprint,
    start: StartEstimate,
    *,
    drain_s: float,
    stop_grace_s: float,
    startup_timeout_s: float,
    max_unavailable_s: float,
    green_at: Callable[[float], Footprint | str] | None = None,
) -> SwitchPlan:
    """The rule: side by side when green fits beside blue and the others; else drain-and-replace when it fits with
    blue stopped and the drain's worst case is within `max_unavailable_s`; else refused with the fix.
    `green_at(u)`: green re-planned at gpu-memory-utilization u, for the fix that sizes it into what blue leaves."""
    beside = room(device, [*([blue] if blue else []), *others])
    alone = room(device, others, released=blue.bytes if blue else 0)
    common: dict[str, Any] = {
        "device": device,
        "blue": blue,
        "others": others,
        "green": green,
        "room_beside_bytes": beside,
        "room_alone_bytes": alone,
        "start": start,
        "max_unavailable_s": max_unavailable_s,
    }
    if green.problem:
        return SwitchPlan(
            decision="refuse",
            reason=f"green cannot run on {device.name} even alone: {green.problem}",
            fixes=green.fixes or ["change green's config (the reason above says what does not fit)"],
            **common,
        )
    if green.most_bytes > alone:
        return SwitchPlan(
            decision="refuse",
            reason=f"green needs {_gib(green.most_bytes)}, more than the {_gib(alone)} it would have even with blue "
            "stopped",
            fixes=[
                f"make green smaller than {_gib(alone)} (a lower gpu-memory-utilization, a smaller KV space or "
                "context, a lower --cache-ram)"
            ],
            **common,
        )
    if green.bytes <= beside:  # and it fits alone as it grows (above): blue stops once green serves
        return SwitchPlan(
            decision="side_by_side",
            reason="green starts beside blue; nginx moves the traffic once it passes the acceptance probe "
            "(no unavailability)",
            **common,
        )
    short = f"green needs {_gib(green.bytes)}, {_gib(beside)} is left beside blue"
    expected = start.seconds
    bound = drain_s + stop_grace_s + (COLD_START_HEADROOM * expected if expected is not None else startup_timeout_s)
    common.update(unavailable_s=expected, unavailable_bound_s=round(bound, 1))
    fixes = [f"allow the outage: --max-unavailable-s {math.ceil(bound)}"]
    if blue is not None and blue.utilization is not None and green.utilization is not None:
        share = math.floor((beside - OUTSIDE_BUDGET_BYTES) / device.total_bytes * 100) / 100
        fixes.insert(0, _share_fix(share, green_at))
        fixes.append(
            "give blue and green a share each (e.g. gpu-memory-utilization 0.45 both) so that the next switch fits "
            "side by side"
        )
    else:
        fixes.insert(0, f"make green fit in the {_gib(beside)} left beside blue (a smaller KV space or context)")
    if bound > max_unavailable_s:
        return SwitchPlan(
            decision="refuse",
            reason=f"{short}: a drain-and-replace could leave no engine serving for up to {math.ceil(bound)} s, "
            f"more than --max-unavailable-s {max_unavailable_s:g}",
            fixes=fixes,
            **common,
        )
    return SwitchPlan(
        decision="drain_and_replace",
        reason=f"{short}: blue drains and stops, then green starts (clients get a fast 503 with Retry-After meanwhile)",
        **common,
    )


def _share_fix(share: float, green_at: Callable[[float], Footprint | str] | None) -> str:
    """Green sized into what blue leaves: the share, and the KV capacity the planner gives it there."""
    if share <= 0:
        return "no gpu-memory-utilization of green fits beside blue: blue leaves less than the CUDA context"
    sized = green_at(share) if green_at is not None else None
    if isinstance(sized, Footprint) and sized.problem:
        return f"no gpu-memory-utilization of green fits beside blue: at {share:.2f} (all blue leaves) {sized.problem}"
    what = f"gpu-memory-utilization {share:.2f} (what blue leaves)"
    if isinstance(sized, Footprint) and sized.kv_tokens is not None:
        what += f": KV cache {sized.kv_tokens:,} tokens ({sized.kv_source})"
    return f"size green to fit beside blue: {what}"


def gate(device: Device, need_fp: Footprint, others: list[Footprint]) -> StartGate:
    """Whether a restart or a fallback start may go ahead now (see StartGate)."""
    if need_fp.problem:
        return StartGate(
            decision="refuse", reason=f"it cannot run on {device.name}: {need_fp.problem}", need=need_fp, room_bytes=0
        )
    cap = device.cap_bytes - sum(o.bytes for o in others)
    if need_fp.most_bytes > cap:
        return StartGate(
            decision="refuse",
            reason=f"it needs {_gib(need_fp.most_bytes)}, more than the {_gib(cap)} serve may use beside its other "
            "engines",
            need=need_fp,
            room_bytes=cap,
        )
    now = room(device, others)
    if need_fp.bytes <= now or device.kind == "host":
        # host RAM: the engine it replaces gave its memory back when it was reaped; what other programs hold is not
        # serve's to wait for
        return StartGate(decision="start", reason="it fits", need=need_fp, room_bytes=now)
    return StartGate(
        decision="wait",
        reason=f"it needs {_gib(need_fp.bytes)} and {_gib(now)} is free now: memory serve's engines do not hold "
        "(a killed engine's not yet released by the GPU driver, another program's)",
        need=need_fp,
        room_bytes=now,
    )


def plan_switch(
    blue: RunningEngine | None,
    others: list[RunningEngine],
    green_cfg: EngineConfig,
    start: StartEstimate,
    choice: DeviceChoice,
    *,
    drain_s: float,
    stop_grace_s: float,
    startup_timeout_s: float,
    max_unavailable_s: float,
) -> SwitchPlan:
    """Measures the device and the engines serve runs, and decides the switch to `green_cfg` (`decide_switch`)."""
    device = device_for(green_cfg, choice)
    if isinstance(device, str):
        return _unplanned(device, start)
    try:
        green = need(green_cfg, device, "green", like=blue)
        if isinstance(green, str):
            return _unplanned(green, start)
        blue_fp = held(blue, device, f"blue (pid {blue.pid})") if blue is not None else None
        held_others = [held(e, device, f"{e.cfg.engine} pid {e.pid}") for e in others]
    except ServetuneError as err:
        return _unplanned(f"the planner cannot read the config: {err.problem}", start)
    return decide_switch(
        device,
        blue_fp,
        held_others,
        green,
        start,
        drain_s=drain_s,
        stop_grace_s=stop_grace_s,
        startup_timeout_s=startup_timeout_s,
        max_unavailable_s=max_unavailable_s,
        green_at=lambda u: need(set_flag(green_cfg, "gpu-memory-utilization", u), device, "green", like=blue),
    )


def plan_start(cfg: EngineConfig, others: list[RunningEngine], choice: DeviceChoice) -> StartGate:
    """Measures the device and decides whether a start of `cfg` beside `others` may go ahead now (`gate`)."""
    device = device_for(cfg, choice)
    if isinstance(device, str):
        return StartGate(decision="unplanned", reason=device)
    try:
        fp = need(cfg, device, "start", like=next((e for e in others if e.cfg.model == cfg.model), None))
        if isinstance(fp, str):
            return StartGate(decision="unplanned", reason=fp)
        return gate(device, fp, [held(e, device, f"pid {e.pid}") for e in others])
    except ServetuneError as err:
        return StartGate(decision="unplanned", reason=f"the planner cannot read the config: {err.problem}")


def _unplanned(why: str, start: StartEstimate) -> SwitchPlan:
    return SwitchPlan(
        decision="unplanned",
        reason=f"cannot plan the memory ({why}): green starts beside blue as it is, and the switch fails cleanly "
        "(nothing changes) if it does not fit",
        start=start,
    )
