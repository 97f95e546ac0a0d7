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
from typing import TYPE_CHECKING, Any, Literal, TypedDict

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


class Seeds(TypedDict):
    """A context's seeds, as a `Workload` takes them."""

    seed: int
    text_seed: int | None


@dataclass(frozen=True)
class ProbeContext:
    """What a probe run needs besides its parameters: the backend to load, the experiment's SLOs (already in
    the backend's wall clock), the seeds of its load, and what the engine said at startup.

    Two seeds: `seed` draws the load — arrival times, request classes and lengths — and `text_seed` the prompts'
    words (None: `seed` draws them too, one seed for everything, as a probe run on its own has). A tune's runs
    get both from `of_run`; `run_probe` hands the probe `for_probe(name)`, so that two probes of one run never
    draw the same prompts either."""

    backend: Backend
    slos: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    facts: Mapping[str, Any] = field(default_factory=dict)
    text_seed: int | None = None

    @classmethod
    def of_run(
        cls,
        backend: Backend,
        *,
        run: str,
        repeat: int,
        draws: str = "",
        again: bool = False,
        slos: Mapping[str, float] | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> ProbeContext:
        """The seeds of repeat `repeat` of a tune's run `run` (a variant's key): common random numbers. The load's
        draws depend on the repeat alone (and on `draws`, a name for a set of fresh ones), so repeat r of every
        variant sends the same arrival times and lengths, and two variants' figures differ by their configs and
        the server's own noise, not by the luck of two draws (a Poisson arrival draw alone moved goodput ±22% per
        repeat on an H200); the ranking then compares them repeat by repeat (`tune.results.stats.delta`). The
        words depend on the run and the repeat, and on `again` (a probe's second run): no run finds another's
        prompt in the engine's prefix cache, even when two variants share a launch."""
        return cls(
            backend,
            slos=dict(slos or {}),
            seed=_seed(f"draws/{draws}/repeat/{repeat}"),
            facts=dict(facts or {}),
            text_seed=_seed(f"{run}/{repeat}{'/again' if again else ''}"),
        )

    def derive(self, tag: str) -> ProbeContext:
        """This context with both seeds moved to `tag`'s (a probe, a load level): distinct from this one's and
        from every other tag's, the same on every rerun; common draws stay common."""
        text = None if self.text_seed is None else _seed(f"{self.text_seed}/{tag}")
        return replace(self, seed=_seed(f"{self.seed}/{tag}"), text_seed=text)

    def for_probe(self, probe: str) -> ProbeContext:
        """This context with the seeds of `probe`'s load in this run: the one rule that makes every probe's
        prompts its own (distinct from its first word on: the text generator is seeded by it), so no probe
        finds another's prompt in the engine's prefix cache (the acceptance probe's long document would
        otherwise be the head of long_prefill's, and its prefill a cache hit)."""
        return self.derive(f"probe/{probe}")

    @property
    def seeds(self) -> Seeds:
        """The seeds as a `Workload` takes them (`Workload.synthetic(..., **ctx.seeds)`)."""
        return Seeds(seed=self.seed, text_seed=self.text_seed)

    @property
    def draw(self) -> str | None:
        """The name of the load's draws when they are common to several runs (`of_run`): two results with the
        same draw saw the same arrivals and lengths (`ProbeResult.draw`). None when one seed draws everything."""
        return None if self.text_seed is None else str(self.seed)

    @property
    def max_model_len(self) -> int | None:
        facts = self.facts
        return self.backend.max_model_len or facts.get("max_model_len") or facts.get("n_ctx_per_slot")


def _seed(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


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
