"""`Probes`: which probes a suite runs, each with its own parameters — built from the probe registry, so the
experiment file and its JSON schema know every probe the moment its module exists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    create_model,
    model_serializer,
    model_validator,
)

from servetune.suite.registry import all_probes


class ProbesBase(BaseModel):
    """Which probes run, each with its own settings (null = the defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_defaults(cls, data: Any) -> Any:
        # `decode_speed:` with nothing after it (YAML null) means "run it with its defaults"; a list names probes.
        if isinstance(data, dict):
            return {k: ({} if v is None else v) for k, v in data.items()}
        if isinstance(data, list):
            return {name: {} for name in data}
        return data

    @model_serializer(mode="wrap")
    def _only_enabled(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A disabled probe is absent, not null: null means "run with the defaults" when read back, so a stored
        # experiment re-read by `servetune report DIR` would show a probe that never ran.
        return {k: v for k, v in handler(self).items() if v is not None}

    def enabled(self) -> list[str]:
        """The probes this suite runs, in suite order."""
        return [name for name in all_probes() if getattr(self, name, None) is not None]

    def params(self, name: str) -> BaseModel | None:
        """One probe's parameters (None when the suite does not run it)."""
        value = getattr(self, name, None)
        return value if isinstance(value, BaseModel) else None


def _build() -> type[ProbesBase]:
    fields: dict[str, Any] = {name: (spec.params | None, None) for name, spec in all_probes().items()}
    return create_model("Probes", __base__=ProbesBase, __doc__=ProbesBase.__doc__, **fields)


if TYPE_CHECKING:
    Probes = ProbesBase
else:
    Probes = _build()
