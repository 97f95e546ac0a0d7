"""control room: the one control-plane HTTP client of a server (health, models, tokenize, metrics text, version).

Entry point: `ControlClient(base_url, api_key=..., timeouts=ControlTimeouts(...))`, which answers `Models` and raises
`ControlError` (`ControlTimeoutError` when the server is too slow; synchronous code runs its calls with
`servetune.process.interrupts.run_coroutine`); `generate_one_token(base_url, model, deadline_s) -> ProbeOutcome`
is the liveness check of a running engine.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.control.client import (
        ControlClient as ControlClient,
        ControlError as ControlError,
        ControlTimeoutError as ControlTimeoutError,
        ControlTimeouts as ControlTimeouts,
        ModelEntry as ModelEntry,
        Models as Models,
        normalize_base_url as normalize_base_url,
        parse_models as parse_models,
    )
    from servetune.control.liveness import ProbeOutcome as ProbeOutcome, generate_one_token as generate_one_token
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "ControlClient": "client",
            "ControlError": "client",
            "ControlTimeoutError": "client",
            "ControlTimeouts": "client",
            "ModelEntry": "client",
            "Models": "client",
            "ProbeOutcome": "liveness",
            "generate_one_token": "liveness",
            "normalize_base_url": "client",
            "parse_models": "client",
        },
    )
