"""What one probe run returns: headline figures by name, curve points, the engine's counter deltas, and the
validity warnings that say when a figure should not be trusted."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ProbeResult(BaseModel):
    """One run of one probe.  `figures` are what tables, ranking and deltas use (None = not measurable here,
    with the reason in `notes`)."""

    model_config = ConfigDict(frozen=True)

    probe: str
    ok: bool = True
    figures: dict[str, float | None] = Field(default_factory=dict)
    points: list[dict[str, float]] = Field(default_factory=list, description="Load-curve points, one per load level.")
    engine_metrics: dict[str, float] = Field(default_factory=dict, description="Engine /metrics deltas over the run.")
    requests: int = 0
    failed_requests: int = 0
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
