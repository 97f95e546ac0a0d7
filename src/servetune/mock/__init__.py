"""mock room: `servetune mock-server`, a fast OpenAI-compatible streaming server with fixed TTFT/ITL that misbehaves
on request.

Entry points: `running(MockConfig(...))` inside a test's event loop (`MockServer`, `Fault`), `serve_forever` as a
command.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.mock.config import Fault as Fault, MockConfig as MockConfig
    from servetune.mock.server import MockServer as MockServer, running as running, serve_forever as serve_forever
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Fault": "config",
            "MockConfig": "config",
            "MockServer": "server",
            "running": "server",
            "serve_forever": "server",
        },
    )
