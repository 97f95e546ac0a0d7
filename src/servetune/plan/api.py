"""`plan_for`: the whole plan for an engine config on a GPU — ledger, verdict, fixes, speeds, command lines.

The ledger is vLLM's (see kvcache.py, memory.py); only the non-KV overhead is a model, and giving
`available_kv_bytes` (the "Available KV cache memory" of a real start) replaces it so that everything after
it reproduces vLLM's startup lines exactly.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from servetune.engines.commands import launch_commands
from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.hardware.catalog import GiB, GPUSpec
from servetune.hardware.gpus import GpuChoice
from servetune.model.hf_config import load_model_spec
from servetune.model.spec import ModelSpec
from servetune.plan import kvcache, memory, roofline
from servetune.plan.defaults import batch_defaults
from servetune.plan.fixes import Fix, find_fixes
from servetune.plan.inputs import inputs_from_flags
from servetune.plan.placement import place
from servetune.plan.rules import batch_budget, check
from servetune.plan.speeds import SpeedEstimate, speed_estimates
from servetune.plan.versions import VllmBehaviour, behaviour

MTP_METHODS = ("mtp", "qwen3_next_mtp", "qwen3_5_mtp", "deepseek_mtp", "ernie_mtp", "glm4_moe_mtp")
DEFAULT_ACCEPTANCE = 0.7


class Plan(BaseModel):
    """vLLM's memory ledger, capacity, verdict, fixes and speed estimate for one config on one GPU type."""

    model_config = ConfigDict(frozen=True)

    model: str
    model_name: str
    gpu: str
    num_gpus: int
    vllm_version: str
    feasible: bool
    reasons: list[str]
    notes: list[str]
    fixes: list[Fix]
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    """Replicas; the capacity figures are per replica (each has its own KV pool and scheduler)."""
    max_model_len: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    serve_dtype: str
    weight_format: str
    prefix_caching: bool
    num_speculative_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    params_loaded: int
    gpu_memory_bytes: int
    requested_bytes: int
    weights_bytes_per_gpu: int
    overhead: memory.Overhead
    available_kv_bytes: int
    available_kv_source: str
    """`model` (weights + overhead model), `given` (a measured figure) or `kv-cache-memory-bytes`."""
    available_kv_low_bytes: int
    available_kv_high_bytes: int
    layout: kvcache.KVLayout
    block_size: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    max_concurrency_low: float
    max_concurrency_high: float
    kv_cache_tokens: int
    needed_kv_bytes: int
    estimated_max_model_len: int
    log_lines: list[str]
    speeds: list[SpeedEstimate]
    serve_flags: dict[str, Any]
    serve_command: str
    docker_command: str
    command_notes: list[str] = []
    """What the commands leave to the user (a bundled model name to replace by the checkpoint's path, ...)."""

    def blocks_for(self, tokens: int) -> int:
        """KV blocks one request of `tokens` tokens holds in the shared pool."""
        return self.layout.blocks_for(tokens)

    def concurrency_for(self, tokens: int) -> float:
        """How many requests of `tokens` tokens fit in the pool at once."""
        return self.num_blocks / self.blocks_for(tokens)


@functools.lru_cache(maxsize=64)
def _cached_spec(
    path: str, lmo: bool | None, quant: str | None, dtype: str | None, revision: str | None = None
) -> ModelSpec:
    return load_model_spec(path, language_model_only=lmo, quantization=quant, dtype=dtype, revision=revision)


def plan_for(
    cfg: EngineConfig,
    gpu: GPUSpec,
    num_gpus: int = 1,
    *,
    vllm_version: str | None = None,
    available_kv_bytes: int | None = None,
    spec: ModelSpec | None = None,
    overhead_model: memory.OverheadModel | None = None,
    efficiency: roofline.Efficiency | None = None,
    acceptance_rate: float = DEFAULT_ACCEPTANCE,
    with_fixes: bool = True,
) -> Plan:
    """Plans `cfg` (vLLM flags by vLLM's names) on `num_gpus` GPUs of type `gpu`."""
    if cfg.engine not in ("vllm", "sim"):
        raise ServetuneError(f"the planner models vLLM, not {cfg.engine}", "plan a vLLM EngineConfig (engine='vllm')")
    given = {k: v for k, v in cfg.flags.items() if v is not None}
    inputs = inputs_from_flags(given)
    if "tensor-parallel-size" not in given:
        placed = place(GpuChoice(gpu, num_gpus, counted=True), given)
        inputs = inputs.model_copy(update={"tensor_parallel_size": placed.tensor_parallel_size})
    beh = behaviour(vllm_version or cfg.version)
    if spec is None:
        revision = given.get("revision")
        spec = _cached_spec(
            str(Path(cfg.model)),
            inputs.language_model_only,
            inputs.quantization,
            inputs.dtype,
            str(revision) if revision else None,
        )
    rules = check(spec, gpu, num_gpus, inputs)
    notes = list(rules.notes) + list(beh.notes)
    reasons = list(rules.problems)
    tp, pp = inputs.tensor_parallel_size, inputs.pipeline_parallel_size

    mnbt_default, mns_default = batch_defaults(gpu, beh)
    mnbt = inputs.max_num_batched_tokens or mnbt_default
    if inputs.enable_chunked_prefill is False and not inputs.max_num_batched_tokens:
        mnbt = max(mnbt, inputs.max_model_len or spec.max_position_embeddings)  # whole prompts in one step
    mns = inputs.max_num_seqs or min(mns_default, mnbt)
    if (budget := batch_budget(mnbt, mns)) is not None:
        reasons.append(budget)
    derived = spec.max_position_embeddings
    max_len, auto_len = _max_model_len(inputs.max_model_len, derived, cfg.env, reasons, notes)
    if max_len < 1:
        raise ServetuneError(f"max_model_len must be positive, got {max_len}", "e.g. --max-model-len 32768 or 32K")
    prefix = inputs.enable_prefix_caching
    if prefix is None:
        prefix = beh.hybrid_prefix_caching_default if spec.is_hybrid else True
    elif prefix and spec.is_hybrid and not beh.hybrid_prefix_caching_supported:
        prefix = False
        notes.append(f"vLLM {beh.version} disables prefix caching for hybrid models even when asked")
    with_mtp = inputs.speculative_method in MTP_METHODS and spec.mtp_layers > 0
    spec_tokens = inputs.num_speculative_tokens

    lay = kvcache.layout(
        spec,
        tp=tp,
        pp=pp,
        kv_cache_dtype=inputs.kv_cache_dtype,
        block_size=inputs.block_size,
        num_spec_tokens=spec_tokens if spec.is_hybrid else 0,
        mtp_drafter=with_mtp,
        prefix_caching=prefix,
        mamba_cache_dtype=inputs.mamba_cache_dtype,
        mamba_ssm_cache_dtype=inputs.mamba_ssm_cache_dtype,
        compute_capability=gpu.compute_capability,
        max_num_batched_tokens=mnbt,
    )
    om = overhead_model or memory.OverheadModel()
    if mnbt > om.measured_tokens:
        notes.append(
            f"the profiling run's activations were measured up to {om.measured_tokens} batched tokens; at {mnbt} "
            "they may be larger than modelled (less KV cache)"
        )
    v2 = v2_model_runner(beh, spec, cfg.env)
    if v2 and not beh.v2_profiles_cudagraphs and not inputs.enforce_eager:
        notes.append(
            f"vLLM {beh.version} runs {spec.architecture} with its V2 model runner, which captures CUDA graphs after "
            "sizing the KV cache: their memory comes out of the headroom above gpu-memory-utilization, not out of "
            "the KV cache"
        )
    util = inputs.gpu_memory_utilization or beh.default_gpu_memory_utilization
    requested = memory.requested_memory(gpu.memory_bytes, util)
    weights = memory.weights_per_gpu(spec, tp=tp, pp=pp, with_mtp=with_mtp)
    over = memory.overhead(
        spec,
        tp=tp,
        pp=pp,
        max_num_batched_tokens=mnbt,
        max_num_seqs=mns,
        spec_tokens=spec_tokens,
        cudagraphs=beh.cudagraph_in_profile and not inputs.enforce_eager and (not v2 or beh.v2_profiles_cudagraphs),
        max_capture=inputs.max_cudagraph_capture_size,
        model=om,
    )
    if available_kv_bytes is not None:
        avail, source, unc = available_kv_bytes, "given", 0
    elif inputs.kv_cache_memory_bytes is not None:
        avail, source, unc = inputs.kv_cache_memory_bytes, "kv-cache-memory-bytes", 0
    else:
        avail, source, unc = requested - weights - over.total_bytes, "model", over.uncertainty_bytes
    if source == "model" and weights > requested:
        reasons.append(
            f"weights need {weights / GiB:.2f} GiB per GPU but the budget is {requested / GiB:.2f} GiB "
            f"({util} x {gpu.memory_bytes / GiB:.2f} GiB): "
            f"{(weights - requested) / GiB:.2f} GiB short before any KV cache"
        )
    if auto_len and avail > 0:
        fit = kvcache.estimate_max_model_len(lay, kvcache.fit_budget(lay, avail, beh), derived)
        if fit:
            max_len = fit
            notes.append(f"max_model_len auto-fit: {fit:,} tokens")
    cap = kvcache.capacity(
        lay,
        available_kv_bytes=max(avail, 0),
        max_model_len=max_len,
        behaviour=beh,
        num_gpu_blocks_override=inputs.num_gpu_blocks_override,
    )
    given_kv = source != "model" or inputs.num_gpu_blocks_override is not None
    if given_kv and weights + cap.available_kv_bytes > gpu.memory_bytes:
        flag = "num-gpu-blocks-override" if inputs.num_gpu_blocks_override is not None else source
        reasons.append(
            f"a KV cache of {cap.available_kv_bytes / GiB:,.2f} GiB ({flag}) and {weights / GiB:.2f} GiB of weights"
            f" are more than the GPU's {gpu.memory_bytes / GiB:.2f} GiB: vLLM cannot allocate it"
        )
    if not cap.fits_one_request and not any("short before any KV" in r for r in reasons):
        reasons.append(_kv_shortfall(cap, avail, max_len))
    low = kvcache.capacity(lay, available_kv_bytes=max(avail - unc, 0), max_model_len=max_len, behaviour=beh)
    high = kvcache.capacity(lay, available_kv_bytes=max(avail + unc, 0), max_model_len=max_len, behaviour=beh)
    feasible = not reasons
    if source == "model" and feasible and not low.fits_one_request:
        notes.append(
            "tight: with overheads at the high end of the model's range one max-length request would not fit; "
            "measure once (servetune plan --from-log) or leave headroom"
        )
    elif source == "model" and not feasible and reasons[-1].startswith("one request") and high.fits_one_request:
        notes.append("borderline: with overheads at the low end of the model's range it would fit")

    flags = _serve_flags(given, rules.extra_flags, max_len, auto_len, tp)
    deploy = EngineConfig(
        engine="vllm",
        model=cfg.model,
        served_model_name=cfg.served_model_name,
        flags=flags,
        env=cfg.env,
        version=beh.version,
    )
    serve, docker = launch_commands(deploy, gpus=num_gpus)
    costs = roofline.model_costs(spec, tp=tp, kv_cache_dtype=inputs.kv_cache_dtype, with_mtp=with_mtp)
    # A config vLLM refuses has no speeds: the verdict comes first, so no length or budget a user mistyped (a
    # 10^12-token context, a 1-token budget) reaches the roofline.
    speeds = (
        speed_estimates(
            costs,
            gpu,
            lay,
            cap.num_blocks,
            mns,
            mnbt,
            max_len,
            spec_tokens if with_mtp else 0,
            efficiency or roofline.Efficiency(),
            acceptance_rate,
        )
        if feasible
        else []
    )
    version = beh.version
    plan = Plan(
        model=cfg.model,
        model_name=spec.name,
        gpu=gpu.name,
        num_gpus=num_gpus,
        vllm_version=version,
        feasible=feasible,
        reasons=reasons,
        notes=notes,
        fixes=[],
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=inputs.data_parallel_size,
        max_model_len=max_len,
        gpu_memory_utilization=util,
        kv_cache_dtype=inputs.kv_cache_dtype,
        serve_dtype=rules.serve_dtype,
        weight_format=spec.quant.label if spec.quant.method != "none" else rules.serve_dtype,
        prefix_caching=prefix,
        num_speculative_tokens=spec_tokens,
        max_num_seqs=mns,
        max_num_batched_tokens=mnbt,
        params_loaded=spec.loaded_params(with_mtp=with_mtp),
        gpu_memory_bytes=gpu.memory_bytes,
        requested_bytes=requested,
        weights_bytes_per_gpu=weights,
        overhead=over,
        available_kv_bytes=avail,
        available_kv_source=source,
        available_kv_low_bytes=avail - unc,
        available_kv_high_bytes=avail + unc,
        layout=lay,
        block_size=lay.block_size,
        num_blocks=cap.num_blocks,
        blocks_per_request=cap.blocks_per_request,
        max_concurrency=cap.max_concurrency,
        max_concurrency_low=low.max_concurrency,
        max_concurrency_high=high.max_concurrency,
        kv_cache_tokens=cap.kv_cache_tokens,
        needed_kv_bytes=cap.needed_bytes,
        estimated_max_model_len=cap.estimated_max_model_len,
        log_lines=cap.log_lines,
        speeds=speeds,
        serve_flags=flags,
        serve_command=serve.text,
        docker_command=docker.text if docker else "",
        command_notes=list(dict.fromkeys((*serve.notes, *(docker.notes if docker else ())))),
    )
    if not feasible and with_fixes:

        def replan(changed: EngineConfig, n: int) -> Plan:
            return plan_for(changed, gpu, n, vllm_version=version, overhead_model=overhead_model, with_fixes=False)

        plan = plan.model_copy(update={"fixes": find_fixes(cfg, gpu, num_gpus, spec, inputs, plan, replan)})
    return plan


def v2_model_runner(beh: VllmBehaviour, spec: ModelSpec, env: dict[str, str]) -> bool:
    """Whether vLLM runs the model with its V2 model runner: `VLLM_USE_V2_MODEL_RUNNER` when set, else the
    release's default (every model from 0.29; in 0.23-0.28 a list of unquantized architectures)."""
    forced = (env or {}).get("VLLM_USE_V2_MODEL_RUNNER")
    if forced is not None and forced.strip().lower() in ("1", "true", "0", "false"):
        return forced.strip().lower() in ("1", "true")
    if beh.v2_runner_architectures is None:
        return True
    return spec.architecture in beh.v2_runner_architectures and spec.quant.method == "none"


def _max_model_len(
    asked: int | None, derived: int, env: dict[str, str], reasons: list[str], notes: list[str]
) -> tuple[int, bool]:
    """(max_model_len, auto-fit?) as vLLM resolves it; longer than the model's needs VLLM_ALLOW_LONG_MAX_MODEL_LEN."""
    max_len = asked if asked is not None else derived
    if max_len == -1:
        return derived, True
    if max_len > derived:
        message = f"max_model_len {max_len:,} exceeds the model's {derived:,} (max_position_embeddings x RoPE scaling)"
        if env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1":
            notes.append(message + ": allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; quality needs RoPE scaling")
        else:
            reasons.append(
                message + "; vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set "
                "(add rope scaling, e.g. YaRN, to the config for quality)"
            )
    return max_len, False


def _kv_shortfall(cap: kvcache.Capacity, avail: int, max_len: int) -> str:
    """Why the KV cache cannot hold one max-length request, by how much, and the length that would fit."""
    if avail <= 0:
        return f"no memory left for the KV cache ({avail / GiB:.2f} GiB after weights and overhead)"
    hint = (
        f"; the largest max_model_len that fits is {cap.estimated_max_model_len:,}"
        if cap.estimated_max_model_len
        else ""
    )
    return (
        f"one request at max_model_len {max_len:,} needs {cap.needed_bytes / GiB:.2f} GiB of KV cache, "
        f"but {cap.available_kv_bytes / GiB:.2f} GiB is available "
        f"({(cap.needed_bytes - cap.available_kv_bytes) / GiB:.2f} GiB short){hint}"
    )


def _serve_flags(user: dict[str, Any], extra: dict[str, str], max_len: int, auto_len: bool, tp: int) -> dict[str, Any]:
    """The user's flags in vLLM spelling, plus what the plan decided (TP, a resolved max_model_len, fallbacks)."""
    flags: dict[str, Any] = dict(user)
    if tp > 1 and "tensor-parallel-size" not in flags:
        flags = {"tensor-parallel-size": tp, **flags}
    if "max-model-len" in flags and not auto_len:
        flags["max-model-len"] = max_len
    for key, value in extra.items():
        flags.setdefault(key, value)
    return flags
