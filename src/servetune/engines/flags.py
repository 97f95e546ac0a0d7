"""Typed flag values → argv, with each engine's own flag names passed through untouched."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from servetune.engines.config import FlagValue

FalseStyle = Literal["no-prefix", "omit"]
"""How an engine spells a False boolean: vLLM and llama.cpp take `--no-<flag>`; SGLang has only store_true."""


def flag_token(name: str) -> str:
    """`max-model-len` → `--max-model-len`; a name already starting with `-` (e.g. `-tp`) stays as written."""
    return name if name.startswith("-") else f"--{name}"


def flags_to_argv(flags: Mapping[str, FlagValue], false_style: FalseStyle = "no-prefix") -> list[str]:
    """True = bare flag, False = `--no-flag` (or left out), None = left out, dict/list = JSON, else str()."""
    argv: list[str] = []
    for name, value in flags.items():
        token = flag_token(name)
        if value is None:
            continue
        if value is True:
            argv.append(token)
        elif value is False:
            if false_style == "no-prefix":
                argv.append(f"--no-{name.lstrip('-')}")
        elif isinstance(value, dict | list):
            argv += [token, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [token, str(value)]
    return argv
