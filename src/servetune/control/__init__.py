"""control room: the one control-plane HTTP client (health, models, tokenize, metrics, version).

`ControlClient(base_url, api_key=..., timeouts=ControlTimeouts(...))` answers `Models`, raises `ControlError`
(`ControlTimeoutError` when the server is too slow), and `run_sync` runs it from synchronous code; the streaming hot
path is `servetune.load`'s own. Importing the package imports no module of it (aiohttp comes with `client`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.control.client import (
        ControlClient as ControlClient,
    )
    from servetune.control.client import (
        ControlError as ControlError,
    )
    from servetune.control.client import (
        ControlTimeoutError as ControlTimeoutError,
    )
    from servetune.control.client import (
        ControlTimeouts as ControlTimeouts,
    )
    from servetune.control.client import (
        ModelEntry as ModelEntry,
    )
    from servetune.control.client import (
        Models as Models,
    )
    from servetune.control.client import (
        normalize_base_url as normalize_base_url,
    )
    from servetune.control.client import (
        parse_models as parse_models,
    )
    from servetune.control.client import (
        run_sync as run_sync,
    )
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
            "normalize_base_url": "client",
            "parse_models": "client",
            "run_sync": "client",
        },
    )
