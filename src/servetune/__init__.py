"""servetune: plan, launch, measure, tune and operate LLM inference servers.

The package is laid out in the order data flows through it:
model/hardware -> plan -> process/engines -> load -> metrics -> suite -> tune -> report, with sim/ as a
simulated engine, operate/ running the result and cli/ (`servetune.cli.main`) as the command over them all; each
room's package names its own entry points. Here, at the ground floor, live what every room shares: the error a
user sees (`ServetuneError`), the one rule of secrets (`Redactor`, `redact`, `is_secret_flag`, `is_secret_name`)
and atomic writes (`atomic_write_text`, `ensure_writable`). Importing it must stay cheap and must never import torch.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

__version__ = "0.2.0"

if TYPE_CHECKING:
    from servetune.errors import ServetuneError as ServetuneError
    from servetune.fileio import atomic_write_text as atomic_write_text, ensure_writable as ensure_writable
    from servetune.secrets import (
        Redactor as Redactor,
        is_secret_flag as is_secret_flag,
        is_secret_name as is_secret_name,
        redact as redact,
    )
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Redactor": "secrets",
            "ServetuneError": "errors",
            "atomic_write_text": "fileio",
            "ensure_writable": "fileio",
            "is_secret_flag": "secrets",
            "is_secret_name": "secrets",
            "redact": "secrets",
        },
    )
