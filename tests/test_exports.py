"""Every package offers its public names in `__all__`, resolved lazily (`servetune._exports.lazy_exports`).

For each package under src/servetune: every name of `__all__` resolves, `__all__` is sorted without duplicates, no
name is one of the package's own modules (importing that module would hide the name), the names and modules of
its `if TYPE_CHECKING:` block are those of its `lazy_exports` call, and importing it in a fresh interpreter
imports none of its modules and none of the heavy libraries. `python -m servetune --help` stays light too.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import servetune
from servetune._exports import lazy_exports

SRC = Path(servetune.__file__).parent
HEAVY = ("torch", "ray", "vllm", "aiohttp", "numpy")
PACKAGES = sorted(".".join(("servetune", *init.parent.relative_to(SRC).parts)) for init in SRC.rglob("__init__.py"))


def init_file(package: str) -> Path:
    return SRC.joinpath(*package.split(".")[1:], "__init__.py")


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def declared(package: str) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> module) of the package's TYPE_CHECKING imports, and of its `lazy_exports` call, read from the
    source (modules relative to the package)."""
    tree = ast.parse(init_file(package).read_text())
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), f"{package}: only imports under TYPE_CHECKING"
                assert stmt.module is not None and stmt.module.startswith(package + "."), stmt.module
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{package}: write `{alias.name} as {alias.name}`"
                    assert alias.name not in typed, f"{package}: {alias.name} imported twice"
                    typed[alias.name] = stmt.module.removeprefix(package + ".")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "lazy_exports"]
    assert len(calls) == 1, f"{package}: one lazy_exports call"
    lazy = ast.literal_eval(calls[0].args[1])
    return typed, lazy


def test_every_package_is_found() -> None:
    assert "servetune" in PACKAGES and "servetune.cli" in PACKAGES and "servetune.suite.probes" in PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_all_resolves_sorted_unique(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    assert names == sorted(names), f"{package}.__all__ is not sorted"
    assert len(names) == len(set(names)), f"{package}.__all__ has duplicates"
    submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    clashes = sorted(set(names) & submodules)
    assert not clashes, f"{package}: names that are also its modules (see servetune/_exports.py): {clashes}"
    for name in names:
        value = getattr(module, name)
        assert not isinstance(value, type(sys)), f"{package}.{name} is a module"
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute"):
        getattr(module, "no_such_name")  # noqa: B009 - the lazy __getattr__ must still say no


@pytest.mark.parametrize("package", PACKAGES)
def test_type_checking_names_equal_all(package: str) -> None:
    typed, lazy = declared(package)
    assert typed == lazy, f"{package}: the TYPE_CHECKING imports and lazy_exports disagree"
    assert sorted(typed) == importlib.import_module(package).__all__


@pytest.mark.parametrize("package", PACKAGES)
def test_import_is_light(package: str) -> None:
    """A fresh interpreter that imports the package imports none of its modules and no heavy library (a
    package whose job needs aiohttp, such as control or load, imports it with the name that needs it)."""
    code = (
        "import json, sys\n"
        f"import {package}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'servetune' or m.startswith('servetune.'))))\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ours, heavy = (json.loads(line) for line in done.stdout.splitlines())
    parents = [".".join(package.split(".")[: i + 1]) for i in range(package.count(".") + 1)]
    assert ours == sorted([*parents, "servetune._exports"]), f"import {package} imported its modules"
    assert heavy == [], f"import {package} imported {heavy}"


def test_a_name_is_resolved_once() -> None:
    import servetune.process as process

    first = process.free_port
    assert vars(process)["free_port"] is first  # later lookups no longer go through __getattr__


def test_lazy_exports_of_a_fake_package() -> None:
    all_, getattr_, dir_ = lazy_exports("servetune", {"ServetuneError": "errors"})
    assert all_ == ["ServetuneError"]
    assert getattr_("ServetuneError") is servetune.errors.ServetuneError
    assert "ServetuneError" in dir_()
    with pytest.raises(AttributeError):
        getattr_("nothing")


def test_help_imports_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "servetune", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "servetune" in imported and "typer" in imported  # the listing was read
    assert sorted(imported & set(HEAVY)) == []
