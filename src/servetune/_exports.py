"""What a package offers, resolved lazily (PEP 562): the one mechanism behind every package's `__all__`.

A package's public names live in its modules, and importing those modules at package-import time would make
`import servetune.<pkg>` pay for aiohttp, numpy, pydantic... (and `servetune --help` with it). So a package's
`__init__.py` names each public name's module and lets the first use import it:

    __all__, __getattr__, __dir__ = lazy_exports(__name__, {"run_load": "runner", "LoadShape": "shape"})

plus an `if TYPE_CHECKING:` block importing the same names, so that type checkers and editors see their types.
A name must not be the name of one of the package's modules: importing `<pkg>.<name>` binds the module as the
package's attribute `<name>`, which would then hide the offered object (tests/test_exports.py checks it).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """(`__all__`, `__getattr__`, `__dir__`) for `package`, whose public names live in its modules: `where` maps
    each name to the module (relative to `package`) that defines it, imported on the name's first use."""
    offered = dict(where)

    def __getattr__(name: str) -> Any:
        module = offered.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups find it without coming here
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | offered.keys())

    return sorted(offered), __getattr__, __dir__
