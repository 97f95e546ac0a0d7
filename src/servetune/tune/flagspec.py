"""The engines' flag names and value kinds, so an experiment with a typo'd flag or a wrong value type is
rejected before a launch instead of failing ten minutes into a matrix.

The tables (data/*.json) list the flags tuners touch, from vLLM's `engine/arg_utils.py` (0.33) and from
`llama-server --help`; they are not exhaustive, so a flag not listed passes with `allow_unknown_flags: true`.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

Kind = Literal["int", "float", "bool", "str", "json", "len", "any"]


@cache
def known_flags(engine: str) -> dict[str, Kind]:
    """Flag name (no dashes) → value kind, for an engine; empty when servetune has no table for it."""
    name = {"vllm": "vllm_flags.json", "sim": "vllm_flags.json", "llamacpp": "llamacpp_flags.json"}.get(engine)
    if name is None:
        return {}
    text = resources.files("servetune.tune").joinpath("data", name).read_text()
    return json.loads(text)


def kind_problem(kind: Kind, value: object) -> str | None:
    """Why `value` does not fit a flag of this kind, or None when it does (None as a value removes a flag)."""
    if value is None or kind == "any":
        return None
    if kind == "bool":
        return None if isinstance(value, bool) else "takes true or false"
    if isinstance(value, bool):
        return None if kind in {"str", "json"} else f"takes {_describe(kind)}, not true/false"
    if kind == "int":
        return None if isinstance(value, int) else f"takes {_describe(kind)}"
    if kind == "float":
        return None if isinstance(value, int | float) else f"takes {_describe(kind)}"
    if kind == "len":
        if isinstance(value, int) or (isinstance(value, str) and _is_len(value)):
            return None
        return f"takes {_describe(kind)}"
    if kind == "json":
        return None if isinstance(value, dict | list | str) else f"takes {_describe(kind)}"
    return None if isinstance(value, str | int | float) else f"takes {_describe(kind)}"


def _describe(kind: Kind) -> str:
    return {
        "int": "a whole number",
        "float": "a number",
        "len": "a token count such as 131072 or 128k",
        "json": "a mapping (it is passed as JSON)",
        "str": "a text value",
    }.get(kind, "a value")


def _is_len(text: str) -> bool:
    body = text.strip().lower().rstrip("km")
    try:
        float(body)
    except ValueError:
        return text.strip().lower() in {"auto", "-1"}
    return True
