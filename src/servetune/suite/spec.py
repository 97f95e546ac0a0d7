"""A probe, defined once: what it sends (its `run`), its parameters, and every figure it reports with unit,
direction, time scaling and SLO meaning.

Everything that needs to know about a probe reads its `ProbeSpec`: the suite runs it on a live server, the
tuner's estimates run the same spec on the simulator, the experiment schema takes its parameters, objectives
and rankings read its figures' directions, reports their units and labels, and the time-scale conversion
their scaling. Adding a probe is adding one module to `servetune.suite.probes` that calls `register`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from servetune.load.shape import LoadShape
from servetune.metrics.reconcile import Prompts

if TYPE_CHECKING:
    from servetune.load.backend import Backend
    from servetune.suite.result import ProbeResult

Better = Literal["higher", "lower", "none"]
Scaling = Literal["time", "rate", "none"]


class Figure(BaseModel):
    """One figure a probe reports."""

    model_config = ConfigDict(frozen=True)

    name: str
    unit: str
    """`ms`, `s`, `tok/s`, `req/s`, `%`, `tokens`, `requests`, `x` or "" (a count or a flag)."""
    better: Better
    scaling: Scaling = "none"
    """How the figure converts when measured against a time-scaled simulator: durations × scale (`time`),
    rates ÷ scale (`rate`), everything else unchanged."""
    label: str = ""
    headline: bool = False
    """Shown in the tables meant for people (the seeds' summary.csv columns)."""
    slo: str | None = None
    """The SLO this figure is judged against when the suite has no load curve: a latency metric (`ttft`,
    `tpot`, `itl`, `e2el`: every percentile key of it) or a run-level key such as `memory_headroom_pct`."""

    def scale_factor(self, scale: float) -> float:
        """The factor that turns a value measured at `scale` simulated seconds per wall second into simulated
        (real-GPU) time."""
        return {"time": scale, "rate": 1 / scale}.get(self.scaling, 1.0)

    @property
    def title(self) -> str:
        return (self.label or self.name.replace("_", " ")) + (f" ({self.unit})" if self.unit else "")


TTFT_PARTS = tuple(
    Figure(name=f"ttft_{part}_ms", unit="ms", better="none", scaling="time", label=f"TTFT's {label} (engine, mean)")
    for part, label in (("queue", "queue"), ("prefill", "prefill"), ("api", "API server"), ("http", "HTTP"))
)
"""The engine's split of a load level's mean TTFT (`metrics.engine_time`)."""


@dataclass(frozen=True)
class ProbeContext:
    """What a probe run needs besides its parameters: the backend to load, the experiment's SLOs (already in
    the backend's wall clock), a seed for its prompts, and what the engine said at startup.

    The seed a caller gives says which run this is (the tuner's: one per variant and repeat); `run_probe` hands
    the probe `for_probe(name)`, so that two probes of one run never draw the same prompts either."""

    backend: Backend
    slos: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    facts: Mapping[str, Any] = field(default_factory=dict)

    def for_probe(self, probe: str) -> ProbeContext:
        """This context with the seed of `probe`'s prompts in this run: the one rule that makes every probe's
        prompts its own (distinct from its first word on: the text generator is seeded by it), so no probe
        finds another's prompt in the engine's prefix cache (the acceptance probe's long document would
        otherwise be the head of long_prefill's, and its prefill a cache hit)."""
        digest = hashlib.sha256(f"{self.seed}/probe/{probe}".encode()).hexdigest()
        return replace(self, seed=int(digest[:8], 16))

    @property
    def max_model_len(self) -> int | None:
        facts = self.facts
        return self.backend.max_model_len or facts.get("max_model_len") or facts.get("n_ctx_per_slot")


ProbeFn = Callable[[ProbeContext, Any], Awaitable["ProbeResult"]]


@dataclass(frozen=True)
class ProbeLoad:
    """One run a probe makes on its backend, as a suite is priced before it starts (`load.options.shape_footprint`,
    the rule that prices a bench run): its load shape, the most output tokens one request asks for, and the
    parameters that set them (what a refusal names)."""

    shape: LoadShape
    output_tokens: int
    sized_by: tuple[str, ...]


def _no_loads(params: Any) -> Sequence[ProbeLoad]:
    return ()


@dataclass(frozen=True)
class ProbeSpec:
    """A probe of the suite (see the module docstring)."""

    name: str
    order: int
    """Where it runs in the suite: cheap and diagnostic first, the load curve last."""
    params: type[BaseModel]
    figures: tuple[Figure, ...]
    run: ProbeFn
    summary: str
    point_figures: tuple[Figure, ...] = ()
    """The figures of each level of a curve (`ProbeResult.points`)."""
    objectives: Mapping[str, str] = field(default_factory=dict)
    """Objective names users may write (`objective: decode_tok_s`) → the figure they mean."""
    simulable: bool = True
    """The simulator backend runs it (False: it needs real hardware, e.g. NVML memory readings)."""
    judges_latency_slos: bool = False
    """Its `goodput_rps` figure is > 0 exactly when some load level met every latency SLO: when the suite runs
    such a probe, it alone decides the latency SLOs."""
    prompts: Prompts = "cold"
    """What its prompts must be to the engine's prefix cache (`metrics.reconcile.Prompts`): `run_probe` proves it
    from the engine's counters and marks a run that broke it not valid."""
    loads: Callable[[Any], Sequence[ProbeLoad]] = _no_loads
    """The runs `run` makes with these parameters (none: it only reads the engine), from the same shapes `run`
    uses, so a suite's records and time are priced before anything launches."""

    def figure(self, name: str) -> Figure | None:
        return next((f for f in (*self.figures, *self.point_figures) if f.name == name), None)


REGISTRY: dict[str, ProbeSpec] = {}


def register(spec: ProbeSpec) -> ProbeSpec:
    """Adds a probe to the suite (each module of `servetune.suite.probes` registers its own)."""
    if spec.name in REGISTRY and REGISTRY[spec.name] is not spec:
        raise ValueError(f"probe {spec.name!r} is registered twice")
    REGISTRY[spec.name] = spec
    return spec
