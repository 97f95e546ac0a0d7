"""A package is a room, not a door: its `__init__.py` says what the room is, and code imports the room's modules.

Every `__init__.py` under src/servetune holds its docstring and nothing else, with two exceptions that a user
reaches by name: `servetune.__version__`, and `servetune.cli.main`, the console script pyproject.toml names. No
import in src, tests, benchmarks or scripts takes a name from a package (`from servetune.load import run_load`);
it names the module (`from servetune.load.runner import run_load`). Importing a package therefore imports none of
its modules and no heavy library, and `python -m servetune --help` stays light too.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import servetune

SRC = Path(servetune.__file__).parent
REPO = SRC.parents[1]
HEAVY = ("torch", "ray", "vllm", "aiohttp", "numpy")
INITS = sorted(SRC.rglob("__init__.py"))
PACKAGES = sorted(".".join(("servetune", *init.parent.relative_to(SRC).parts)) for init in INITS)
ALLOWED = {"servetune": {"__version__"}, "servetune.cli": {"main"}}
"""package -> the names its `__init__.py` may define beside its docstring."""


def defined(init: Path) -> set[str]:
    """The names an `__init__.py` binds at module level, or `import` if it imports anything there."""
    names: set[str] = set()
    body = ast.parse(init.read_text(), str(init)).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names |= {t.id if isinstance(t, ast.Name) else ast.unparse(t) for t in stmt.targets}
        else:
            names.add(type(stmt).__name__.lower())
    return names


def test_every_package_is_found() -> None:
    assert "servetune" in PACKAGES and "servetune.cli" in PACKAGES and "servetune.suite.probes" in PACKAGES


def test_a_package_holds_its_docstring_only() -> None:
    extra = {}
    for init, package in zip(INITS, PACKAGES, strict=True):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{package}: say what the room is in a docstring"
        names = defined(init) - ALLOWED.get(package, set())
        if names:
            extra[package] = sorted(names)
    assert extra == {}, f"an __init__.py defines or imports (import the module that holds the name): {extra}"


def test_no_import_takes_a_name_from_a_package() -> None:
    """`from servetune.<package> import X` is allowed only where X is a module (or `cli.main`)."""
    modules = {".".join(("servetune", *p.relative_to(SRC).with_suffix("").parts)) for p in SRC.rglob("*.py")}
    modules |= {m.removesuffix(".__init__") for m in modules}
    files = [p for d in ("src", "tests", "benchmarks", "scripts") for p in sorted((REPO / d).rglob("*.py"))]
    through = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in PACKAGES:
                names = {a.name for a in node.names if f"{node.module}.{a.name}" not in modules}
                names -= ALLOWED.get(node.module, set())
                if names:
                    through.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module} {sorted(names)}")
    assert through == [], "imports through a package (name the module):\n" + "\n".join(through)


def test_importing_a_package_is_light() -> None:
    """A fresh interpreter that imports each package in turn imports none of its modules and no heavy library."""
    code = (
        "import importlib, json, sys\n"
        f"for package in {PACKAGES!r}:\n"
        "    importlib.import_module(package)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'servetune' or m.startswith('servetune.'))))\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ours, heavy = (json.loads(line) for line in done.stdout.splitlines())
    assert ours == PACKAGES, f"importing the packages imported modules: {sorted(set(ours) - set(PACKAGES))}"
    assert heavy == []


def test_the_console_script_runs_the_command() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['servetune', '--help']; from servetune.cli import main; main()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout


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
