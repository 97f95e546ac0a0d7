"""A simulated deployment: the planner's capacity for (model, GPU, flags) + a step-time model.

Everything the simulator knows about memory comes from the planner (`servetune.plan.api.plan_for`):
block size, number of KV blocks, blocks per request, the KV-cache size and maximum concurrency that
vLLM would log. So the simulator preempts exactly where the planner says the pool runs out, and its
startup lines equal the planner's numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from servetune.engines.config import EngineConfig
from servetune.engines.flagtable import FlagValue
from servetune.errors import ServetuneError
from servetune.sim.flags import SimServeArgs, sim_args
from servetune.sim.profile import CalibrationProfile
from servetune.sim.scheduler import SchedulerLimits
from servetune.sim.steptime import StepCoefficients, StepTimeModel

GiB = 1024**3


@dataclass(frozen=True)
class SimDeployment:
    """What sim-serve and estimate run: limits for the scheduler, a step-time model, vLLM's log facts."""

    args: SimServeArgs
    limits: SchedulerLimits
    timing: StepTimeModel
    vllm_version: str
    weights_gib: float
    available_kv_gib: float
    kv_cache_tokens: int
    max_concurrency: float
    capacity_lines: tuple[str, ...] = ()
    """The planner's `GPU KV cache size` / `Maximum concurrency` lines, formatted as this vLLM version does."""
    notes: tuple[str, ...] = ()

    def request_floor_s(self, output_tokens: int) -> float:
        """The shortest a request of `output_tokens` can take here: the API server's time and one decode step per
        token (or per draft window), each step no faster than one sequence's decode over a one-token context —
        what bounds how many requests a closed loop bounded by seconds sends (`LoadOptions.footprint`)."""
        step = self.timing.decode_gpu_times(1, 1, 1)[0]
        steps = math.ceil(output_tokens / (1 + self.limits.num_speculative_tokens))
        return self.timing.coef.request_overhead_s + steps * step

    def startup_lines(self) -> list[str]:
        """vLLM-shaped startup log lines (the engine adapter parses these as it parses vLLM's)."""
        lim = self.limits
        lines = [f"vLLM API server version {self.vllm_version}"]
        nondefault = {k.replace("-", "_"): v for k, v in self.engine_flags().items() if v is not None}
        lines.append(f"non-default args: {nondefault}")
        if lim.hybrid:
            lines.append(
                f"Setting attention block size to {lim.block_size} tokens to ensure that attention page size "
                "is >= mamba page size."
            )
            if lim.enable_prefix_caching:
                lines.append(
                    "Mamba cache mode is set to 'align' for hybrid models by default when prefix caching is enabled"
                )
        if lim.async_scheduling:
            lines.append("Asynchronous scheduling is enabled.")
        if lim.chunked_prefill:
            lines.append(f"Chunked prefill is enabled with max_num_batched_tokens={lim.max_num_batched_tokens}.")
        lines.append(f"Model loading took {self.weights_gib:.2f} GiB memory and 0.000000 seconds")
        lines.append(f"Available KV cache memory: {self.available_kv_gib:.2f} GiB")
        lines.extend(self.capacity_lines)
        for flag in self.args.ignored:
            lines.append(f"sim-serve: ignoring flag it does not model: {flag}")
        lines.extend(self.notes)
        return lines

    def engine_flags(self) -> dict[str, FlagValue]:
        return engine_flags(self.args)

    @property
    def served_name(self) -> str:
        """The model name clients send (`--served-model-name`, else the model)."""
        return self.args.served_model_name or self.args.model

    @property
    def label(self) -> str:
        """What is simulated, for messages: `simulated vLLM 0.24.0 on 1x H200`."""
        return f"simulated vLLM {self.vllm_version} on {self.args.tensor_parallel_size}x {self.timing.gpu.name}"

    def models_payload(self, name: str) -> dict[str, Any]:
        """`/v1/models` as vLLM answers it (sim-serve serves it, the in-process backend parses it)."""
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": self.args.model,
            "parent": None,
            "max_model_len": self.limits.max_model_len,
            "permission": [],
        }
        return {"object": "list", "data": [card]}

    def check_request(self, prompt_tokens: int, max_tokens: int | None) -> tuple[int, str | None]:
        """vLLM's check of a request against the context it serves: (the output budget, None), or (_, the
        message of its HTTP 400). Without `max_tokens` the budget is what the context leaves."""
        limit = self.limits.max_model_len
        budget = max_tokens if max_tokens is not None else limit - prompt_tokens
        if prompt_tokens >= limit or prompt_tokens + budget > limit:
            return budget, (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt_tokens + max(budget, 1)} tokens ({prompt_tokens} in the messages, {max(budget, 1)} in the "
                "completion). Please reduce the length of the messages or completion."
            )
        if budget < 1:
            return budget, "max_tokens must be a positive integer"
        return budget, None


def engine_flags(a: SimServeArgs) -> dict[str, FlagValue]:
    """The vLLM flags (EngineConfig names) that the planner reads, from sim-serve's arguments."""
    flags: dict[str, FlagValue] = {
        "tensor-parallel-size": a.tensor_parallel_size if a.tensor_parallel_size != 1 else None,
        "max-model-len": a.max_model_len,
        "max-num-seqs": a.max_num_seqs,
        "max-num-batched-tokens": a.max_num_batched_tokens,
        "gpu-memory-utilization": a.gpu_memory_utilization,
        "kv-cache-dtype": a.kv_cache_dtype if a.kv_cache_dtype != "auto" else None,
        "enable-prefix-caching": a.enable_prefix_caching,
        "block-size": a.block_size,
        "language-model-only": a.language_model_only or None,
        "quantization": a.quantization,
        "dtype": a.dtype,
        "enforce-eager": a.enforce_eager or None,
        "enable-chunked-prefill": None if a.enable_chunked_prefill else False,
        "async-scheduling": a.async_scheduling,
        **a.planner_flags,
    }
    if a.num_speculative_tokens:
        flags["speculative-config"] = {
            "method": a.speculative_method or "mtp",
            "num_speculative_tokens": a.num_speculative_tokens,
        }
    return {k: v for k, v in flags.items() if v is not None}


def deployment_for_config(
    cfg: EngineConfig, *, gpu: str | None = None, calibration: CalibrationProfile | None = None
) -> SimDeployment:
    """The simulated deployment of an EngineConfig (vLLM or sim) on `gpu` (which overrides a sim config's
    `gpu` flag; default H200). A vLLM config's flags that the simulator does not model are named in the startup
    notes (they are vLLM's, checked where the config was written); a sim config's must be the simulator's."""
    from servetune.engines.models import resolve_model

    cfg = resolve_model(cfg)  # `tiny`: the built tiny model's files
    flags: dict[str, FlagValue] = dict(cfg.flags)
    if gpu:
        flags["gpu"] = gpu
    if cfg.served_model_name:
        flags["served-model-name"] = cfg.served_model_name
    args = sim_args(flags, model=cfg.model)
    if cfg.version and not args.vllm_version:
        args = args.model_copy(update={"vllm_version": cfg.version})
    return build_deployment(args, calibration.coefficients if calibration else None)


def build_deployment(args: SimServeArgs, coefficients: StepCoefficients | None = None) -> SimDeployment:
    """Plans the deployment with the planner and attaches the (calibrated) step-time model."""
    from servetune.hardware.gpus import parse_gpu_arg
    from servetune.model.hf_config import load_model_spec
    from servetune.plan.api import MTP_METHODS, plan_for
    from servetune.plan.roofline import model_costs

    gpu = parse_gpu_arg(args.gpu).gpu  # the count is in tensor_parallel_size already (flags.py)
    tp = args.tensor_parallel_size
    spec = load_model_spec(
        args.model,
        language_model_only=args.language_model_only or None,
        quantization=args.quantization,
        dtype=args.dtype,
    )
    cfg = EngineConfig(engine="vllm", model=args.model, flags=engine_flags(args), version=args.vllm_version)
    plan = plan_for(cfg, gpu, tp, spec=spec, with_fixes=False)
    if not plan.feasible:
        raise ServetuneError(
            f"vLLM would not start with these flags on {tp}x{gpu.name}: " + "; ".join(plan.reasons),
            "run `servetune plan` with the same flags: it lists the changes that make it fit",
        )
    coef = coefficients
    notes: list[str] = []
    if coef is None and args.calibration:
        profile = CalibrationProfile.load(args.calibration)
        coef = profile.coefficients
        if profile.gpu != gpu.name:
            notes.append(f"sim-serve: calibration profile is for {profile.gpu}, serving as {gpu.name}")
    with_mtp = (
        (args.speculative_method or "mtp") in MTP_METHODS and spec.mtp_layers > 0 and args.num_speculative_tokens > 0
    )
    costs = model_costs(spec, tp=tp, kv_cache_dtype=args.kv_cache_dtype, with_mtp=with_mtp)
    lay = plan.layout
    limits = SchedulerLimits(
        max_num_seqs=plan.max_num_seqs,
        max_num_batched_tokens=plan.max_num_batched_tokens,
        max_model_len=plan.max_model_len,
        block_size=plan.block_size,
        num_blocks=plan.num_blocks,
        state_blocks_per_request=sum(lay.mamba_slots_per_request for g in lay.groups if g.kind == "mamba"),
        hybrid=spec.is_hybrid,
        enable_prefix_caching=plan.prefix_caching,
        num_speculative_tokens=args.num_speculative_tokens,
        acceptance_rate=args.acceptance_rate,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
        chunked_prefill=args.enable_chunked_prefill,
        async_scheduling=_async_scheduling(args, plan.vllm_version, spec.is_hybrid and plan.prefix_caching),
        seed=args.seed,
    )
    return SimDeployment(
        args=args,
        limits=limits,
        timing=StepTimeModel.of(costs, gpu, coef),
        vllm_version=plan.vllm_version,
        weights_gib=plan.weights_bytes_per_gpu / GiB,
        available_kv_gib=plan.available_kv_bytes / GiB,
        kv_cache_tokens=plan.kv_cache_tokens,
        max_concurrency=plan.max_concurrency,
        capacity_lines=tuple(plan.log_lines),
        notes=tuple(notes),
    )


def _async_scheduling(args: SimServeArgs, vllm_version: str, hybrid_prefix_caching: bool) -> bool:
    """vLLM's async-scheduling default: on from about 0.20 (0.24.0 logs "Asynchronous scheduling is
    enabled"), off for hybrid models with prefix caching ("not compatible with prefix caching for Mamba
    models and will be disabled"); the flag decides when given."""
    if args.async_scheduling is not None:
        return args.async_scheduling
    from servetune.plan.versions import parse_version

    return parse_version(vllm_version) >= (0, 20, 0) and not hybrid_prefix_caching
