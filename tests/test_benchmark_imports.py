"""The committed benchmarks keep working as the house is rebuilt: every `from servetune… import name` in
benchmarks/ and scripts/ (function-level ones included) names a module and an attribute that exist.

The benchmarks run for minutes on engines, so CI does not run them; this is the part of them that breaks
silently when a concept moves to its owner (operate's `request_switch` moving to `operate/control.py` broke
benchmarks/operate/run.py until this test).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FILES = sorted(p for d in ("benchmarks", "scripts") for p in (REPO / d).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every servetune import in `path`; name None for `import servetune.x`."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "servetune":
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "servetune"]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_servetune_name_a_benchmark_imports_exists(path: Path) -> None:
    missing = []
    for line, module, name in _imports(path):
        try:
            mod = importlib.import_module(module)
        except ImportError as err:
            missing.append(f"{path.name}:{line}: {module}: {err}")
            continue
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")  # `from package import submodule`
            except ImportError:
                missing.append(f"{path.name}:{line}: {module} has no {name}")
    assert not missing, "\n".join(missing)
