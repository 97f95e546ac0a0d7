"""The floors of the house hold: rooms import only downward, and no files import each other in a loop.

A room is a package directly under src/servetune (`cli`, `tune`, ...) or a module there (`errors.py`, ...); its
sub-packages (`suite/probes`) are part of it. `FLOORS` below is the allowed order, written once (docs/design.md
draws the same table): a room may import rooms on a lower floor, or beside it on its own floor, never one on a
higher floor. Every import statement of src/servetune is read with `ast`: module-level ones, those inside
functions (where the CLI imports its rooms), those under `if TYPE_CHECKING:`, and `importlib.import_module` of
a constant name, so that no arrow hides behind a lazy import. Three things are asserted: no import runs up the
floors, no rooms import each other in a loop, and no files import each other in a loop (inside a package or
across packages).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "servetune"

FLOORS: dict[int, tuple[str, ...]] = {
    11: ("__main__.py",),
    10: ("cli",),
    9: ("demo.py",),
    8: ("report",),
    7: ("tune",),
    6: ("operate", "sim"),
    5: ("plan", "suite"),
    4: ("engines", "load"),
    3: ("metrics",),
    2: ("model", "process", "hardware", "tiny", "control", "mock", "fileio.py"),
    1: ("__init__.py", "errors.py", "secrets.py", "humanize.py", "demo_args.py"),
}
"""floor -> rooms. A package is named by its folder, a module directly under servetune by its file name."""


@dataclass(frozen=True)
class Arrow:
    """`source` (a module) imports `target` (a module) at `line` of the source's file."""

    source: str
    target: str
    line: int


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at `root` (a package by its __init__.py)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(node: ast.AST, package: str, known: Mapping[str, Path]) -> list[str]:
    """The modules one import statement (or `importlib.import_module("...")` call) names, as keys of `known`.
    `from a.b import c` names `a.b.c` when that is a module, otherwise `a.b`."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: package.count(".") + 2 - node.level]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        names = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
    elif (
        isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None) == "__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        names = [node.args[0].value]
    resolved = []
    for name in names:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in known:
            resolved.append(name)
    return resolved


def arrows(root: Path) -> list[Arrow]:
    """Every import of the package at `root` from one of its modules to another (itself excluded)."""
    known = modules(root)
    found: list[Arrow] = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, package, known):
                if target != name:
                    found.append(Arrow(name, target, getattr(node, "lineno", 0)))
    return found


def room_of(module: str, root: Path) -> str:
    """The room a module stands in: its top package's folder name, or its own file name directly under root."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return parts[1] if (root / parts[1]).is_dir() else f"{parts[1]}.py"


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan), each sorted: every loop of the graph lies
    in one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(groups)


@dataclass(frozen=True)
class Findings:
    """What a reading of the house found against `FLOORS`."""

    unplaced: list[str]
    upward: list[str]
    room_circles: list[list[str]]
    file_circles: list[list[str]]
    rooms: int
    room_arrows: int


def survey(root: Path, floors: Mapping[int, Iterable[str]]) -> Findings:
    floor_of = {room: floor for floor, rooms in floors.items() for room in rooms}
    all_arrows = arrows(root)
    rooms = {room_of(m, root) for m in modules(root)}
    file_edges: dict[str, set[str]] = defaultdict(set)
    room_edges: dict[str, set[str]] = defaultdict(set)
    upward: list[str] = []
    for arrow in all_arrows:
        file_edges[arrow.source].add(arrow.target)
        source, target = room_of(arrow.source, root), room_of(arrow.target, root)
        if source == target:
            continue
        room_edges[source].add(target)
        if source in floor_of and target in floor_of and floor_of[target] > floor_of[source]:
            upward.append(
                f"{arrow.source} (floor {floor_of[source]}) imports {arrow.target} (floor {floor_of[target]}) "
                f"at line {arrow.line}"
            )
    return Findings(
        unplaced=sorted(rooms - floor_of.keys()),
        upward=sorted(set(upward)),
        room_circles=circles(room_edges),
        file_circles=circles(file_edges),
        rooms=len(rooms),
        room_arrows=sum(len(t) for t in room_edges.values()),
    )


def test_every_room_has_a_floor() -> None:
    placed = [room for rooms in FLOORS.values() for room in rooms]
    assert len(placed) == len(set(placed)), "a room stands on two floors"
    found = survey(SRC, FLOORS)
    assert found.unplaced == [], f"rooms missing from FLOORS in {__file__}: {found.unplaced}"
    gone = sorted(set(placed) - {room_of(m, SRC) for m in modules(SRC)})
    assert gone == [], f"FLOORS names rooms that no longer exist: {gone}"


def test_no_import_runs_up_the_floors() -> None:
    upward = survey(SRC, FLOORS).upward
    assert upward == [], "imports against the floors (move the shared thing down, or pass a Protocol):\n" + "\n".join(
        upward
    )


def test_no_rooms_import_each_other_in_a_loop() -> None:
    assert survey(SRC, FLOORS).room_circles == []


def test_no_files_import_each_other_in_a_loop() -> None:
    assert survey(SRC, FLOORS).file_circles == []


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    """A package `pkg` under `root` holding `files` (path -> source), each folder a package."""
    package = root / "pkg"
    for relative, text in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    return package


SMALL = {1: ("__init__.py", "base"), 2: ("top",)}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "base/a.py": "X = 1\n",
            "top/b.py": "from pkg.base.a import X\nfrom . import c\n",
            "top/c.py": "def f():\n    from pkg.base import a\n    return a\n",
        },
    )
    found = survey(root, SMALL)
    assert (found.upward, found.room_circles, found.file_circles, found.unplaced) == ([], [], [], [])
    assert (found.rooms, found.room_arrows) == (3, 1)


@pytest.mark.parametrize(
    ("upward", "line"),
    [
        ("from pkg.top.b import Y\n", 1),
        ("def f():\n    from pkg.top import b\n    return b\n", 2),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top.b import Y\n", 3),
        ("import importlib\nb = importlib.import_module('pkg.top.b')\n", 2),
        ("from ..top import b\n", 1),
    ],
    ids=["module-level", "function-level", "type-checking", "importlib", "relative"],
)
def test_an_upward_import_fails(tmp_path: Path, upward: str, line: int) -> None:
    root = _tree(tmp_path, {"base/a.py": upward, "top/b.py": "Y = 2\n"})
    found = survey(root, SMALL)
    assert found.upward == [f"pkg.base.a (floor 1) imports pkg.top.b (floor 2) at line {line}"]
    assert found.room_circles == []


def test_loops_between_rooms_and_between_files_fail(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "base/a.py": "from pkg.base import b\n",
            "base/b.py": "def f():\n    from pkg.base import a\n",
            "top/c.py": "from pkg.base import a\n",
            "side.py": "import pkg.top.c\n",
        },
    )
    found = survey(root, {1: ("__init__.py", "base"), 2: ("top", "side.py")})
    assert found.file_circles == [["pkg.base.a", "pkg.base.b"]]
    assert found.room_circles == [] and found.upward == []
    (root / "top" / "c.py").write_text("from pkg import side\n")
    (root / "base" / "b.py").write_text("X = 1\n")
    assert survey(root, {1: ("__init__.py", "base"), 2: ("top", "side.py")}).room_circles == [["side.py", "top"]]


def test_a_room_missing_from_the_floors_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"base/a.py": "", "new/b.py": "", "loose.py": ""})
    assert survey(root, SMALL).unplaced == ["loose.py", "new"]


TUNE_FLOORS: dict[str, int] = {"loop": 4, "execution": 3, "search": 2, "results": 2, "schema": 1}
"""tune/'s own parts: what the file says (schema) → what to measure next (search) beside what it means (results) →
measuring it (execution) → the conductor (loop.py)."""


def test_tune_parts_import_only_downward() -> None:
    def part(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "tune" else None

    upward = sorted(
        f"{a.source} imports {a.target} at line {a.line}"
        for a in arrows(SRC)
        if (source := part(a.source)) in TUNE_FLOORS
        and (target := part(a.target)) in TUNE_FLOORS
        and TUNE_FLOORS[target] > TUNE_FLOORS[source]
    )
    assert upward == [], "imports against tune/'s parts:\n" + "\n".join(upward)
    placed = {p for m in modules(SRC) if (p := part(m)) is not None}
    assert placed == set(TUNE_FLOORS), f"tune/ parts missing from TUNE_FLOORS: {sorted(placed - set(TUNE_FLOORS))}"
