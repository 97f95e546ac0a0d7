"""`servetune estimate`: predicted latency and throughput of a workload on a config, without a GPU.

The same scheduler and step-time model as `sim-serve`, on a virtual clock, so a 1,000-request workload
takes seconds. The tuner calls `estimate_config()` to rank or prune variants before launching any; the
figures carry vLLM's names and definitions (TTFT, TPOT = (E2E − TTFT)/(n − 1), ITL between streamed
chunks, E2EL; throughputs over the run).
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.sim.deployment import SimDeployment, build_deployment
from servetune.sim.flags import parse_sim_args
from servetune.sim.profile import CalibrationProfile
from servetune.sim.virtual import RequestSpec, VirtualRun, run_virtual

if TYPE_CHECKING:
    from servetune.load.shape import LoadShape
    from servetune.load.workload import Workload

PERCENTILES = (50, 90, 99)


class SimWorkload(BaseModel):
    """A synthetic workload: lengths (uniform within ±spread), optional shared prefix, how it arrives."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_requests: int = Field(1000, ge=1)
    input_len: int = Field(1024, ge=1)
    output_len: int = Field(256, ge=1)
    spread: float = Field(0.0, ge=0, lt=1, description="Lengths uniform in [1-spread, 1+spread] x nominal.")
    shared_prefix_len: int = Field(0, ge=0, description="Tokens every prompt starts with (a system prompt).")
    concurrency: int | None = Field(None, ge=1, description="Closed loop: requests in flight.")
    request_rate: float | None = Field(None, gt=0, description="Open loop: Poisson arrivals per second.")
    seed: int = 0

    def specs(self) -> list[RequestSpec]:
        rng = random.Random(self.seed)

        def draw(n: int) -> int:
            return max(1, round(n * rng.uniform(1 - self.spread, 1 + self.spread))) if self.spread else n

        out = []
        for _ in range(self.num_requests):
            prompt = draw(self.input_len)
            out.append(RequestSpec(prompt, draw(self.output_len), min(self.shared_prefix_len, prompt)))
        return out

    def send_times(self) -> list[float] | None:
        if self.request_rate is None:
            return None
        rng = random.Random(self.seed + 1)
        t, out = 0.0, []
        for _ in range(self.num_requests):
            out.append(t)
            t += rng.expovariate(self.request_rate)
        return out


class Dist(BaseModel):
    """Mean and percentiles of one figure, in milliseconds."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values_s: list[float]) -> Dist:
        if not values_s:
            return cls(mean=float("nan"), p50=float("nan"), p90=float("nan"), p99=float("nan"))
        arr = np.asarray(values_s) * 1000
        p = np.percentile(arr, PERCENTILES)
        return cls(mean=float(arr.mean()), p50=float(p[0]), p90=float(p[1]), p99=float(p[2]))


class EstimateResult(BaseModel):
    """What the simulator predicts for a workload on a deployment."""

    ttft_ms: Dist
    tpot_ms: Dist
    itl_ms: Dist
    e2el_ms: Dist
    output_throughput: float
    request_throughput: float
    total_token_throughput: float
    duration_s: float
    completed: int
    num_preemptions: int
    prefix_cache_hit_rate: float
    max_running: int
    kv_cache_tokens: int
    max_concurrency: float
    sim_steps: int
    wall_s: float = Field(description="How long the estimate itself took.")
    cpu_s: float = Field(0.0, description="CPU time the estimate itself used (wall time on a busy machine is more).")

    @property
    def speedup(self) -> float:
        """Simulated seconds per wall second."""
        return self.duration_s / self.wall_s if self.wall_s else float("inf")


def summarize(run: VirtualRun, dep: SimDeployment, wall_s: float, cpu_s: float = 0.0) -> EstimateResult:
    lines = run.timelines
    ttft = [t.ttft for t in lines]
    tpot = [(t.e2e - t.ttft) / (t.output_tokens - 1) for t in lines if t.output_tokens > 1]
    itl = [b - a for t in lines for a, b in zip(t.chunk_times, t.chunk_times[1:])]
    out = sum(t.output_tokens for t in lines)
    prompt = sum(t.num_prompt_tokens for t in lines)
    dur = run.duration or float("nan")
    return EstimateResult(
        ttft_ms=Dist.of(ttft),
        tpot_ms=Dist.of(tpot),
        itl_ms=Dist.of(itl),
        e2el_ms=Dist.of([t.e2e for t in lines]),
        output_throughput=out / dur,
        request_throughput=len(lines) / dur,
        total_token_throughput=(out + prompt) / dur,
        duration_s=run.duration,
        completed=len(lines),
        num_preemptions=run.num_preemptions,
        prefix_cache_hit_rate=run.prefix_hits / run.prefix_queries if run.prefix_queries else 0.0,
        max_running=run.max_running,
        kv_cache_tokens=dep.kv_cache_tokens,
        max_concurrency=dep.max_concurrency,
        sim_steps=run.num_steps,
        wall_s=wall_s,
        cpu_s=cpu_s,
    )


def estimate(dep: SimDeployment, workload: SimWorkload) -> EstimateResult:
    """Runs `workload` through the simulated deployment on a virtual clock."""
    if (workload.concurrency is None) == (workload.request_rate is None):
        raise ServetuneError(
            "a workload needs exactly one of concurrency or request_rate",
            "give --concurrency N (closed loop) or --request-rate R (Poisson)",
        )
    t0, c0 = time.perf_counter(), time.process_time()
    run = run_virtual(
        workload.specs(), dep.limits, dep.timing, concurrency=workload.concurrency, send_times=workload.send_times()
    )
    return summarize(run, dep, time.perf_counter() - t0, time.process_time() - c0)


def workload_from_load(
    workload: Workload, shape: LoadShape, num_requests: int = 1000
) -> tuple[list[RequestSpec], int | None, list[float] | None]:
    """A load-room workload and shape as simulator requests: (specs, concurrency, send times).

    Lengths are drawn from the workload's own distributions (class by weight, seeded); a shared prefix
    stays shared within its group. Conversations count as independent requests (their growing history
    is not modelled), gamma arrivals as Poisson; warm-up is not simulated (the simulator needs none).
    """
    import numpy as np

    if workload.source is not None:
        raise ServetuneError("the simulator cannot estimate a file workload", "describe it with request classes")
    rng = np.random.default_rng(workload.seed)
    weights = np.array([c.weight for c in workload.classes], dtype=float)
    n = shape.requests or num_requests
    specs = []
    for i in range(n):
        k = int(rng.choice(len(workload.classes), p=weights / weights.sum()))
        cls = workload.classes[k]
        prompt = cls.input_dist.sample(rng)
        group = k * 1000 + i % cls.prefix_groups
        specs.append(RequestSpec(prompt, cls.output_dist.sample(rng), min(cls.shared_prefix_tokens, prompt), group))
    if shape.kind == "concurrency":
        return specs, shape.concurrency or 1, None
    times, t = [], 0.0
    rate = shape.rate or float("inf")
    for _ in range(n):
        times.append(t)
        t += rng.exponential(1 / rate) if rate != float("inf") else 0.0
    return specs, None, times


def estimate_load(
    cfg: EngineConfig,
    workload: Workload,
    shape: LoadShape,
    *,
    gpu: str | None = None,
    calibration: CalibrationProfile | None = None,
) -> EstimateResult:
    """Like `estimate_config`, for a load-room `Workload` and `LoadShape` (what the suite's probes use)."""
    dep = deployment_for_config(cfg, gpu=gpu, calibration=calibration)
    specs, concurrency, send_times = workload_from_load(workload, shape)
    t0, c0 = time.perf_counter(), time.process_time()
    run = run_virtual(specs, dep.limits, dep.timing, concurrency=concurrency, send_times=send_times)
    return summarize(run, dep, time.perf_counter() - t0, time.process_time() - c0)


def config_argv(cfg: EngineConfig) -> list[str]:
    """vLLM-style argv for an EngineConfig (its flags by vLLM's names)."""
    argv = [cfg.model]
    for name, value in cfg.flags.items():
        if value is None:
            continue
        if value is True:
            argv.append(f"--{name}")
        elif value is False:
            argv.append(f"--no-{name}")
        elif isinstance(value, (dict, list)):
            import json

            argv += [f"--{name}", json.dumps(value)]
        else:
            argv += [f"--{name}", str(value)]
    return argv


def estimate_config(
    cfg: EngineConfig,
    workload: SimWorkload,
    *,
    gpu: str | None = None,
    calibration: CalibrationProfile | None = None,
) -> EstimateResult:
    """The tuner's entry point: predicted figures of `workload` on the server `cfg` would launch.

    `gpu` overrides a `gpu` flag in `cfg` (sim-only flag; default H200); the calibration profile, when
    given, replaces the default step-time coefficients.
    """
    return estimate(deployment_for_config(cfg, gpu=gpu, calibration=calibration), workload)


def deployment_for_config(
    cfg: EngineConfig, *, gpu: str | None = None, calibration: CalibrationProfile | None = None
) -> SimDeployment:
    """The simulated deployment of an EngineConfig (vLLM or sim) on `gpu`."""
    args = parse_sim_args(config_argv(cfg))
    if gpu:
        args = args.model_copy(update={"gpu": gpu})
    if cfg.version and not args.vllm_version:
        args = args.model_copy(update={"vllm_version": cfg.version})
    return build_deployment(args, calibration.coefficients if calibration else None)
