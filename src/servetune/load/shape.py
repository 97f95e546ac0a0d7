"""How requests arrive: closed loop at a concurrency, or open loop at a rate; bounds, warm-up and cool-down.

Closed loop: `concurrency` conversations in flight, the next starts when one ends. Open loop: arrivals at
`rate` per second (Poisson; gamma with `burstiness` < 1 burstier, > 1 smoother, as vLLM's --burstiness;
or constant), optionally capped at `max_concurrency`. A run is bounded by a request count and/or a duration
of the measured phase; warm-up requests (a count or seconds) come first and are excluded; cool-down keeps the
load on for a while after the last measured request was sent so that the measured tail does not see a
draining server, and is excluded too.

A closed loop's streams start spread evenly over `ramp_s` (default: the warm-up's seconds), not all at once.
Started together, N streams of one output length finish together and start again together for the whole run, on
a real engine (one batch decoding in step) as on the mock: waves of N requests sent in one moment, which is a
load no user produces and which the client itself must absorb (`benchmarks/client`, c767: up to 308 requests
sent in one 10 ms window, 84 % of the windows empty, TTFT p90 9-12 ms above the truth; ramped 0.1-2 ms). With
no time warm-up there is nothing to ramp over and the streams start at once, as `vllm bench serve` starts its
`--max-concurrency` requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servetune.control.client import ControlTimeouts
from servetune.errors import ServetuneError
from servetune.metrics.record import Phase

if TYPE_CHECKING:
    import numpy as np


class Timeouts(BaseModel):
    """Per-request limits; a request that hits one is counted under its own error class."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_s: float = 10.0
    first_token_s: float = 600.0  # long prefills (128K) take a while
    inter_token_s: float = 120.0
    request_s: float = 3600.0  # whole request (the limit for non-streamed answers)

    def control(self) -> ControlTimeouts:
        """The one timeout policy of a run's control-plane calls (`/tokenize`, `/v1/models`, `/health`): no call
        may wait longer than a request may wait for its first token, so a frozen server fails a run within the
        user's `--first-token-timeout` instead of an HTTP library's default."""
        return ControlTimeouts(connect_s=self.connect_s, total_s=min(self.first_token_s, self.request_s))


class LoadShape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["concurrency", "rate"] = "concurrency"
    concurrency: int | None = Field(None, ge=1)
    rate: float | None = Field(None, gt=0)  # requests (conversations) per second; inf = all at once
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    burstiness: float = Field(1.0, gt=0)
    max_concurrency: int | None = Field(None, ge=1)
    requests: int | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0)
    warmup_requests: int = Field(0, ge=0)
    warmup_s: float = Field(0.0, ge=0)
    cooldown_s: float = Field(0.0, ge=0)
    ramp_s: float | None = Field(None, ge=0)  # closed loop: streams start over this many s (None: the warm-up's)
    seed: int = 0
    timeouts: Timeouts = Timeouts()

    @model_validator(mode="after")
    def _check(self) -> LoadShape:
        if self.kind == "concurrency" and self.concurrency is None:
            raise ServetuneError("a closed-loop load shape needs a concurrency", "set concurrency=N")
        if self.kind == "rate" and self.rate is None:
            raise ServetuneError("an open-loop load shape needs a rate", "set rate=R requests/s (inf for all at once)")
        if self.requests is None and self.duration_s is None:
            raise ServetuneError("a load shape needs a bound", "set requests=N and/or duration_s=S")
        if self.kind == "rate" and self.ramp_s:
            raise ServetuneError(
                "a ramp spreads the starts of a closed loop's streams; an open loop's arrivals have their own times",
                "drop ramp_s with a rate, or use a concurrency",
            )
        if (
            self.kind == "rate"
            and self.rate == float("inf")
            and (self.requests is None or self.duration_s or self.warmup_s or self.cooldown_s)
        ):
            # Every arrival is at t = 0, so a time-based bound or phase would never end.
            raise ServetuneError(
                "all-at-once arrivals (rate inf) are bounded by a request count only",
                "set requests=N (and warmup_requests=N), not a duration, warm-up or cool-down in seconds",
            )
        return self

    @classmethod
    def closed(
        cls, concurrency: int, *, requests: int | None = None, duration_s: float | None = None, **kw: Any
    ) -> LoadShape:
        return cls(kind="concurrency", concurrency=concurrency, requests=requests, duration_s=duration_s, **kw)

    @classmethod
    def open(
        cls,
        rate: float,
        *,
        arrival: Literal["poisson", "gamma", "constant"] = "poisson",
        requests: int | None = None,
        duration_s: float | None = None,
        **kw: Any,
    ) -> LoadShape:
        return cls(kind="rate", rate=rate, arrival=arrival, requests=requests, duration_s=duration_s, **kw)

    def with_level(self, value: float) -> LoadShape:
        """The same shape at another concurrency or rate (a point of a sweep)."""
        if self.kind == "concurrency":
            return self.model_copy(update={"concurrency": int(value)})
        return self.model_copy(update={"rate": float(value)})

    def stream_starts(self) -> list[float]:
        """Closed loop: the offset in seconds at which each of the `concurrency` streams starts its first
        conversation (evenly over the ramp; all 0 without one). The one rule of every closed-loop driver."""
        n = self.concurrency or 1
        ramp = self.warmup_s if self.ramp_s is None else self.ramp_s
        return [k * ramp / n for k in range(n)]

    def arrivals(self, n: int) -> np.ndarray:
        """Send offsets in seconds of the first n open-loop arrivals (deterministic by seed), as a numpy array."""
        import numpy as np

        rate = self.rate or float("inf")
        if rate == float("inf"):
            return np.zeros(n)
        rng = np.random.default_rng([self.seed, 7])
        if self.arrival == "constant":
            gaps = np.full(n, 1.0 / rate)
        elif self.arrival == "poisson":
            gaps = rng.exponential(1.0 / rate, n)
        else:
            gaps = rng.gamma(self.burstiness, 1.0 / (rate * self.burstiness), n)
        gaps[0] = 0.0
        return np.cumsum(gaps)


class Phaser:
    """Decides the phase of each new conversation: warm-up, measured, cool-down, or stop.

    The one rule for every driver of a load shape: the live runner and the simulator's virtual run ask it the
    same question at each new conversation, so both measure the same requests."""

    def __init__(self, shape: LoadShape) -> None:
        self.s = shape
        self.issued = 0
        self.measured = 0
        self.measure_t0: float | None = None
        self.measure_end: float | None = None

    def next(self, t: float) -> Phase | None:
        """`t`: seconds since the start (the schedule time in open loop, the clock in closed loop)."""
        s = self.s
        self.issued += 1
        if self.measure_end is None:
            if self.issued <= s.warmup_requests or t < s.warmup_s:
                return "warmup"
            if self.measure_t0 is None:
                self.measure_t0 = t
            count_left = s.requests is None or self.measured < s.requests
            time_left = s.duration_s is None or t - self.measure_t0 < s.duration_s
            if count_left and time_left:
                self.measured += 1
                return "measure"
            self.measure_end = t
        if t - self.measure_end < self.s.cooldown_s:
            return "cooldown"
        return None


def open_schedule(shape: LoadShape, phaser: Phaser) -> Iterator[tuple[int, float, Phase]]:
    """The open-loop schedule: (conversation index, send offset in s, phase) until the phaser says stop. Computed
    once from the seed by whoever drives the run (the in-process runner, or the coordinator that hands it out to
    its workers), so the merged stream is exactly the requested arrival process."""
    offsets = shape.arrivals(4096)
    index = 0
    while True:
        if index >= len(offsets):
            offsets = shape.arrivals(len(offsets) * 4)
        t = float(offsets[index])
        phase = phaser.next(t)
        if phase is None:
            return
        yield index, t, phase
        index += 1
