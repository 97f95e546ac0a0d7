"""The committed benchmarks keep working as the house is rebuilt: every `from servetune… import name` in
benchmarks/ and scripts/ (function-level ones included) names a module and an attribute that exist, every
`from benchmarks.<folder>.<module> import name` (a sibling) and `from tests.<…> import name` (a test harness) names
a file of this checkout that defines the name, and no benchmark patches `sys.path`: each runs from the repository
root as `python -m benchmarks.<folder>.<script>` with the installed package.

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
ON_THE_DEVICE = {
    "benchmarks/device_campaign/driver.py",
    "benchmarks/device_campaign/campaign.py",  # launch.sh runs `campaign.py plan` beside driver.py
    "benchmarks/sim_fidelity/campaign.py",  # device_campaign.sh runs it
    "benchmarks/tuning_table/",
}
"""Run on the GPU device, where servetune is not installed and runs from PYTHONPATH, as scripts that reach their
siblings by path."""


def _imports(path: Path, roots: tuple[str, ...]) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import of a module under `roots` in `path`; name None for `import x.y`."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in roots:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] in roots]
    return found


def _defines(path: Path, name: str) -> bool:
    """Whether the module at `path` binds `name` at its top level (a def, a class, an assignment, an import)."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _module_file(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base):
        if candidate.exists():
            return candidate
    return None


def _on_the_device(path: Path) -> bool:
    relative = path.relative_to(REPO).as_posix()
    return any(relative == place or relative.startswith(place) for place in ON_THE_DEVICE)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_servetune_name_a_benchmark_imports_exists(path: Path) -> None:
    missing = []
    for line, module, name in _imports(path, ("servetune",)):
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


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_sibling_and_harness_a_benchmark_imports_exists(path: Path) -> None:
    missing = []
    for line, module, name in _imports(path, ("benchmarks", "tests")):
        where = _module_file(module)
        if where is None:
            missing.append(f"{path.name}:{line}: no file for {module}")
        elif (
            name is not None
            and where.suffix == ".py"
            and not _defines(where, name)
            and _module_file(f"{module}.{name}") is None
        ):
            missing.append(f"{path.name}:{line}: {module} defines no {name}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.parts[len(REPO.parts)] == "benchmarks"], ids=lambda p: str(p.relative_to(REPO))
)
def test_no_benchmark_patches_sys_path(path: Path) -> None:
    patches = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys"
    ]
    assert patches == [] or _on_the_device(path), (
        f"{path.name}:{patches}: run it as `python -m benchmarks.<dir>.<script>`"
    )
