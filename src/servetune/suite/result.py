"""What one probe run returns: headline figures by name, curve points, the engine's counter deltas, the
figures' reconciliation with the engine's own account, and the validity warnings that say when a figure should
not be trusted."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from servetune.load.backend import GreedyText
from servetune.metrics.reconcile import Reconciliation


class ProbeResult(BaseModel):
    """One run of one probe.  `figures` are what tables, ranking and deltas use (None = not measurable here,
    with the reason in `notes`)."""

    model_config = ConfigDict(frozen=True)

    probe: str
    ok: bool = True
    figures: dict[str, float | None] = Field(default_factory=dict)
    points: list[dict[str, float]] = Field(default_factory=list, description="Load-curve points, one per load level.")
    engine_metrics: dict[str, float] = Field(default_factory=dict, description="Engine /metrics deltas over the run.")
    reconciliation: Reconciliation | None = Field(
        default=None,
        description="servetune's token and request counts against the engine's own counters over the run (None: "
        "not compared). A disagreement makes the run not ok: not valid for comparisons.",
    )
    unsteady: list[str] = Field(
        default_factory=list,
        description="Why the probe's load was no steady-state measurement: a server stall in a measured window, a "
        "window that was not steady (each run's validity verdict). `tune` runs such a probe once more.",
    )
    repeated_because: list[str] = Field(
        default_factory=list,
        description="This is a second run of the probe: the first one's `unsteady` reasons (empty: it ran once).",
    )
    draw: str | None = Field(
        default=None,
        description="The load's random draws (arrival times, request lengths) when they were common to several runs "
        "(`ProbeContext.of_run`: a tune's repeat r on every variant): results with the same draw compare repeat by "
        "repeat. None: the run's draws were its own, or it was stored before draws were recorded.",
    )
    requests: int = 0
    failed_requests: int = 0
    samples: list[GreedyText] = Field(
        default_factory=list, description="Greedy answers the correctness probe keeps, to compare configs."
    )
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
