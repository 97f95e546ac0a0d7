"""Fuzz experiment files (issue 16): `tune --check` on a mutated example is a valid plan or a clear error naming
the key — never a traceback, never a hang — and it launches nothing.

Each draw takes one of the shipped examples, picks up to three places in its tree and replaces a value with a
hostile one (a wrong type, zero, a negative, NaN, an empty list, a huge number, unicode), deletes a key, or adds
an unknown one. The mutated file is written as YAML and checked in-process (`servetune.cli.main`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, strategies as st

from .cli_run import assert_clear, run_cli, warm
from .test_fuzz_cli import fuzzed

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "tune"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
HOSTILE: list[Any] = [
    0, -1, -0.5, 1e308, 10**15, math.nan, math.inf, "", "☃", "1k", "abc", [], {}, [1, "a"], {"x": 1}, None,
    True, "tiny", "/nonexistent", "A100", "H200x0", "={1}", "=HYPERLINK(\"http://x\")",
]  # fmt: skip
Path_ = tuple[Any, ...]


def _places(node: Any, at: Path_ = ()) -> list[Path_]:
    """Every key path of the tree (dict keys and list indexes)."""
    out: list[Path_] = [at] if at else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _places(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _places(value, (*at, i))
    return out


def _parent(tree: Any, path: Path_) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any]:
    source = draw(st.sampled_from(EXAMPLES))
    tree = yaml.safe_load(source.read_text())
    for _ in range(draw(st.integers(1, 3))):
        places = _places(tree)
        path = draw(st.sampled_from(places))
        parent = _parent(tree, path)
        action = draw(st.sampled_from(["replace", "replace", "delete", "unknown"]))
        if action == "replace":
            parent[path[-1]] = draw(st.sampled_from(HOSTILE))
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["colour", "repeat", "engines", "slo", "Name"]))] = draw(
                st.sampled_from(HOSTILE)
            )
    return source.name, tree


def test_mutated_experiments_are_plans_or_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    warm()

    @fuzzed("tune-experiments")
    @given(mutated())
    def one(case: tuple[str, Any]) -> None:
        name, tree = case
        path = tmp_path / name
        path.write_text(yaml.safe_dump(tree, allow_unicode=True))
        out = tmp_path / "never-made"
        words = ["tune", str(path), "--check", "--out", str(out)]
        done = run_cli(words)
        assert_clear([*words, f"# from {name}: {tree!r}"[:2000]], done)
        assert done.code in (0, 2), done.said
        assert not out.exists(), "--check launched or wrote something"

    one()


def test_duplicate_keys_empty_dimensions_and_zero_time_scale_fail_the_check(tmp_path: Path) -> None:
    """Three silent passes of 0.1's `--check`."""
    base = (EXAMPLES_DIR / "qwen36-27b-2xa100-sim.yaml").read_text()
    cases = {
        "duplicate": base + "\nname: again\n",
        "empty-grid": base.split("variants:")[0] + "variants:\n  grid:\n    max-num-seqs: []\n",
        "zero-scale": base.split("variants:")[0]
        + "variants:\n  matrix:\n    changes:\n      frozen: {time-scale: 0}\n",
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        done = run_cli(["tune", str(path), "--check"])
        assert_clear(["tune", name], done)
        assert done.code == 2, f"{name} passed the check:\n{done.said}"


GPU_IDS: list[Any] = [[0, 1], "0,1", [0, 0], [], "-1", [99999999999], "GPU-abc", "MIG-x/1", "", "x", 5, None, [None]]
ADDRESSES: list[Any] = [
    "127.0.0.1:1", "10.255.255.1:6379", "ray://127.0.0.1:10001", "[::1]:6379", "auto", "garbage", "", "h:99999",
    "h:0", "127.0.0.1", "☃:1", "a" * 300, 6379, None,
]  # fmt: skip
RESOURCES: list[Any] = ["GPU", "fake_gpu", "", "a b", "-x", 5, None]
KINDS: list[Any] = ["local", "local-gpus", "local-gpus", "ray", "ray", "cloud", "", 5, None]


@st.composite
def with_executor(draw: st.DrawFn) -> tuple[str, Any, list[str]]:
    """A shipped example with an `executor:` block of hostile keys, and hostile `--executor` options."""
    source = draw(st.sampled_from(EXAMPLES))
    tree = yaml.safe_load(source.read_text())
    kind = draw(st.sampled_from(KINDS))
    block: dict[str, Any] = {"kind": kind}
    for key, pool in (("gpus", GPU_IDS), ("address", ADDRESSES), ("resource", RESOURCES)):
        if draw(st.booleans()):
            block[key] = draw(st.sampled_from(pool))
    tree["executor"] = draw(st.sampled_from([block, block, block, kind, [block]]))
    options: list[str] = []
    for flag, pool in (("--executor", KINDS), ("--gpus", GPU_IDS), ("--ray-address", ADDRESSES)):
        if draw(st.integers(0, 3)) == 0:
            options += [flag, str(draw(st.sampled_from(pool)))]
    return source.name, tree, options


def test_executor_keys_are_refused_or_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`executor: {kind: local-gpus, gpus: ...}` and `ray` with bad addresses: `tune --check` refuses them naming
    the key, or plans within the bound; it never connects to a cluster and never hangs."""
    monkeypatch.chdir(tmp_path)
    warm()

    @fuzzed("tune-executors")
    @given(with_executor())
    def one(case: tuple[str, Any, list[str]]) -> None:
        name, tree, options = case
        path = tmp_path / name
        path.write_text(yaml.safe_dump(tree, allow_unicode=True))
        out = tmp_path / "never-made"
        words = ["tune", str(path), "--check", "--out", str(out), *options]
        done = run_cli(words)
        assert_clear([*words, f"# executor: {tree['executor']!r}"[:2000]], done)
        assert done.code in (0, 2), done.said
        assert not out.exists(), "--check launched or wrote something"

    one()
