"""Is a server ready? `/health` answers 200 *and* `/v1/models` lists the served name.

Through the control-plane client with short timeouts: a probe costs about a millisecond on localhost, so launch
polls every few tens of milliseconds (one keep-alive session for the whole wait) and learns of readiness well
under 100 ms after the engine gets there.
"""

from __future__ import annotations

from dataclasses import dataclass

from servetune.control.client import ControlClient, ControlError, Models


@dataclass(frozen=True)
class Probe:
    """One readiness probe's result."""

    health_status: int | None
    models: Models | None = None
    error: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return self.models.names if self.models else ()

    def ready_for(self, model: str) -> bool:
        return self.health_status == 200 and model in self.names

    def max_model_len(self, model: str) -> int | None:
        entry = self.models.find(model) if self.models else None
        return entry.max_model_len if entry else None


async def probe(client: ControlClient) -> Probe:
    """Probes `/health` then (if healthy) `/v1/models`; never raises for network errors."""
    try:
        status = await client.health()
    except ControlError as err:
        return Probe(health_status=None, error=err.problem)
    if status != 200:
        return Probe(health_status=status)
    try:
        return Probe(health_status=status, models=await client.models())
    except ControlError as err:
        return Probe(health_status=status, error=f"/v1/models: {err.problem}")
