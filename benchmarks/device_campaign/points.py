"""The load points of the 2026-12 device campaign, and how each becomes a servetune Workload + LoadShape.

Shared by the device driver (`driver.py`, runs under the device's python3 with only aiohttp, pydantic and numpy
beside servetune's source) and the scorer here (`compare.py`). Stdlib only at import time.

Point kinds:
- `closed`:  closed loop at `concurrency` (the next request starts when one ends), `requests` measured after
             `warmup_requests` of the same workload (excluded: the ramp when all streams start at once).
- `burst`:   `requests` requests sent at once (open loop, rate = inf), nothing excluded: the whole burst is
             the measurement (the first-token queue under chunked prefill is what it tests).
- `poisson`: open loop, Poisson arrivals at `rate_factor` x the measured request throughput of the point
             named `rate_ref` on the same server (chosen on the device, recorded in the point's files), for
             about `poisson_s` seconds of arrivals; without a `rate_ref`, at `rate_factor` req/s (a fixed rate:
             the same arrivals on every server).

The grid probe (`G_c8`, `G_c32`, `G_c64`) is servetune's `load_curve` probe definition (suite/probes.py): closed
loop, fixed 512-token prompts and 128-token outputs, n = max(requests_per_point, 2 x concurrency) measured
requests with requests_per_point = 16, a warm-up of `concurrency` requests, no stop at saturation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Cls:
    """One request class: lengths in tokens (uniform within +-spread of the nominal), optional shared prefix."""

    name: str
    input_tokens: int
    output_tokens: int
    weight: float = 1.0
    spread: float = 0.0
    shared_prefix_tokens: int = 0
    prefix_groups: int = 1


@dataclass(frozen=True)
class Point:
    name: str
    kind: str  # closed | burst | poisson
    classes: tuple[Cls, ...]
    requests: int
    concurrency: int | None = None
    warmup_requests: int = 0
    rate_factor: float | None = None
    rate_ref: str | None = None
    poisson_s: float = 10.0
    est_s: float = 10.0
    """Expected wall seconds on the Qwen3.6-27B shape (scaled per model by SPEED in the plan)."""
    seed: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, d: dict) -> Point:
        """A point from its `as_dict` (a plan's `points`: a plan may define its own)."""
        return cls(**{**d, "classes": tuple(Cls(**c) for c in d["classes"]), "tags": tuple(d.get("tags", ()))})


def one(name: str, i: int, o: int, spread: float = 0.0, **kw) -> tuple[Cls, ...]:
    return (Cls(name, i, o, spread=spread, **kw),)


POINTS: dict[str, Point] = {
    p.name: p
    for p in (
        # a short warm-up after every start (kernel autotuning, first CUDA-graph replays); records kept apart
        Point("warmup", "closed", one("warm", 1024, 32), requests=8, concurrency=4, est_s=4, tags=("warmup",)),
        # the grid probe: load_curve(concurrency=[8, 32, 64], requests_per_point=16, input 512, output 128)
        Point("G_c8", "closed", one("probe", 512, 128), requests=16, concurrency=8, warmup_requests=8, est_s=7),
        Point("G_c32", "closed", one("probe", 512, 128), requests=64, concurrency=32, warmup_requests=32, est_s=9),
        Point("G_c64", "closed", one("probe", 512, 128), requests=128, concurrency=64, warmup_requests=64, est_s=15),
        # one stream: decode speed, long prefill
        Point("decode_c1", "closed", one("decode", 1024, 128), requests=2, concurrency=1, warmup_requests=1, est_s=6),
        Point("prefill_16k", "closed", one("prefill", 16384, 8), requests=2, concurrency=1, warmup_requests=1, est_s=6),
        # bursts: all at once (the first-token queue under the token budget)
        Point("burst_c32", "burst", one("burst", 1024, 128), requests=32, est_s=8),
        Point("burst_c128", "burst", one("burst", 512, 64), requests=128, est_s=11),
        # long prefills mixed with decodes: 1 in 8 requests is an 8k document
        Point(
            "mixed_long_c16",
            "closed",
            (Cls("chat", 512, 128, weight=0.875, spread=0.25), Cls("doc", 8192, 16, weight=0.125)),
            requests=48,
            concurrency=16,
            est_s=12,
            seed=1,
        ),
        # shared prefixes: 2 system prompts of 4096 tokens, 256 unique tokens each, 64 out
        Point(
            "prefix_c16",
            "closed",
            one("prefix", 4096 + 256, 64, shared_prefix_tokens=4096, prefix_groups=2),
            requests=32,
            concurrency=16,
            est_s=12,
            seed=2,
        ),
        # Poisson arrivals near saturation: a fraction of the measured closed-loop c64 request rate
        Point(
            "poisson_hi",
            "poisson",
            one("poisson", 512, 128, spread=0.25),
            requests=0,
            rate_factor=0.9,
            rate_ref="G_c64",
            est_s=15,
            seed=3,
        ),
        Point(
            "poisson_lo",
            "poisson",
            one("poisson", 512, 128, spread=0.25),
            requests=0,
            rate_factor=0.6,
            rate_ref="G_c64",
            est_s=14,
            seed=4,
        ),
    )
}

GRID_PROBE = ("G_c8", "G_c32", "G_c64")


def poisson_requests(point: Point, rate: float) -> int:
    """How many arrivals a Poisson point sends at `rate` (about `poisson_s` seconds of them, 16..400)."""
    return max(16, min(400, round(rate * point.poisson_s)))


def build(point: Point, rate: float | None = None, scale: float = 1.0):
    """(Workload, LoadShape) of a point; `rate` for Poisson points; `scale` shrinks counts (CPU rehearsal)."""
    from servetune.load.shape import LoadShape, Timeouts
    from servetune.load.workload import Dist, RequestClass, Workload

    def dist(n: int, spread: float) -> int | Dist:
        if not spread:
            return n
        return Dist(kind="uniform", mean=n, std=spread * n / 3**0.5, min=max(1, round(n * (1 - spread))))

    classes = tuple(
        RequestClass(
            name=c.name,
            weight=c.weight,
            input_tokens=dist(c.input_tokens, c.spread),
            output_tokens=dist(c.output_tokens, c.spread),
            shared_prefix_tokens=c.shared_prefix_tokens,
            prefix_groups=c.prefix_groups,
        )
        for c in point.classes
    )
    workload = Workload(seed=point.seed, classes=classes, output_control="ignore_eos")

    def n(x: int) -> int:
        return max(1, round(x * scale)) if x else 0

    timeouts = Timeouts(first_token_s=300.0, inter_token_s=60.0, request_s=600.0)
    if point.kind == "closed":
        shape = LoadShape(
            kind="concurrency",
            concurrency=max(1, min(point.concurrency or 1, n(point.concurrency or 1))),
            requests=n(point.requests),
            warmup_requests=n(point.warmup_requests),
            seed=point.seed,
            timeouts=timeouts,
        )
    elif point.kind == "burst":
        shape = LoadShape(
            kind="rate", rate=float("inf"), requests=n(point.requests), seed=point.seed, timeouts=timeouts
        )
    else:
        assert rate is not None and rate > 0
        shape = LoadShape(
            kind="rate",
            rate=rate,
            arrival="poisson",
            requests=n(poisson_requests(point, rate)),
            seed=point.seed,
            timeouts=timeouts,
        )
    return workload, shape
