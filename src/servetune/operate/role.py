"""One upstream pool of `servetune serve` and what the supervisor knows about its engine.

Its own module so that the supervisor, the blue-green switch and the control face share the type without
importing each other.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from servetune.control.liveness import ProbeOutcome
from servetune.engines.config import EngineConfig
from servetune.engines.launch import RunningEngine
from servetune.operate.fallback import Capacity, Fallback
from servetune.operate.liveness import Liveness


@dataclass
class Role:
    """One upstream pool and the engine serving it."""

    name: str
    cfg: EngineConfig
    fallback: Fallback | None = None
    on_fallback: bool = False
    engine: RunningEngine | None = None
    liveness: Liveness | None = None
    state: str = "starting"
    deaths: deque[float] = field(default_factory=deque)
    attempt: int = 0
    failed_starts: int = 0
    """Starts in a row that never became ready (reset once one does): what gives up."""
    next_start: float = 0.0
    ready_at: float = 0.0
    primary_capacity: Capacity | None = None
    """Measured capacity of the last engine of the primary profile (what a fallback is compared with)."""
    launches: int = 0
    """Starts attempted; every start after the first is planned against the device's memory first."""
    memory_wait_since: float | None = None
    """When the next start began waiting for memory to be free (None: not waiting)."""

    def adopt(self, cfg: EngineConfig) -> None:
        """A switched-to config becomes this role's own: its primary profile, with no crash history to count."""
        self.cfg, self.on_fallback = cfg, False
        self.deaths.clear()
        self.attempt = 0


@dataclass(frozen=True)
class Hung:
    """A liveness verdict handed from the probe thread to the supervisor's main loop."""

    role: str
    engine: RunningEngine
    outcome: ProbeOutcome
    since_ok_s: float
