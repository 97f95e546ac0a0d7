"""mock room: `servetune mock-server`, a fast OpenAI-compatible streaming server (`MockServer`) with fixed TTFT/ITL
that misbehaves on request (`Fault`); `running(MockConfig())` runs it inside a test's event loop, `serve_forever`
as a command."""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.mock.config import Fault as Fault
    from servetune.mock.config import MockConfig as MockConfig
    from servetune.mock.server import MockServer as MockServer
    from servetune.mock.server import running as running
    from servetune.mock.server import serve_forever as serve_forever
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
