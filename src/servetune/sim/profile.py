"""A calibration profile: step-time coefficients fitted for one GPU + model + engine version.

Kept apart from the fitting code (`calibration.py`, numpy) so that loading a profile stays cheap for
`sim-serve` and `estimate`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servetune.errors import ServetuneError
from servetune.sim.steptime import StepCoefficients


class CalibrationProfile(BaseModel):
    """Fitted coefficients for one GPU + model + engine version, with what they were fitted on."""

    model_config = ConfigDict(extra="forbid")

    gpu: str
    device: str | None = Field(
        default=None,
        description="The --gpu argument the runs were fitted with (custom:... spelled out): what estimates simulate "
        "when the experiment names no GPU (a CPU engine described as a custom device).",
    )
    model: str
    engine: str = "vllm"
    engine_version: str | None = None
    tensor_parallel_size: int = 1
    coefficients: StepCoefficients
    fitted_on: list[str] = Field(default_factory=list)
    fit_errors: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Per fitted run: relative error of each target after the fit."
    )
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @model_validator(mode="before")
    @classmethod
    def _fitted_without_later_terms(cls, data: Any) -> Any:
        """A profile fitted before the API server's time per prompt token was a coefficient (2026-12-03) keeps the
        predictions it was fitted with: its `request_overhead_s` already holds its prompts' share, so the new term
        is 0 there, not the planning default (which would count the prompts twice)."""
        if isinstance(data, dict) and isinstance(data.get("coefficients"), dict):
            data = {**data, "coefficients": {"request_token_s": 0.0, **data["coefficients"]}}
        return data

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> CalibrationProfile:
        p = Path(path)
        if not p.exists():
            raise ServetuneError(f"calibration profile {p} does not exist", "make one with `servetune calibrate`")
        try:
            return cls.model_validate_json(p.read_text())
        except ValueError as err:
            raise ServetuneError(
                f"{p} is not a calibration profile: {err}", "regenerate it with `servetune calibrate`"
            ) from None
