"""The plan as command lines: `vllm serve ...` and `docker run ... vllm/vllm-openai:vX ...`.

Flags keep vLLM's names; True is a bare flag, False the `--no-` form, dicts/lists are JSON.
"""

from __future__ import annotations

import json
import shlex
from pathlib import PurePosixPath
from typing import Any


def flag_args(flags: dict[str, Any]) -> list[str]:
    """vLLM argv for a flag dict (None values are left out)."""
    argv: list[str] = []
    for name, value in flags.items():
        key = name.lstrip("-").replace("_", "-")
        if value is None:
            continue
        if value is True:
            argv.append(f"--{key}")
        elif value is False:
            argv.append(f"--no-{key}")
        elif isinstance(value, dict | list):
            argv += [f"--{key}", json.dumps(value, separators=(", ", ": "))]
        else:
            argv += [f"--{key}", str(value)]
    return argv


def serve_command(model: str, flags: dict[str, Any]) -> str:
    """`vllm serve MODEL --flag value ...`, shell-quoted."""
    return shlex.join(["vllm", "serve", model, *flag_args(flags)])


def docker_command(model: str, flags: dict[str, Any], *, version: str, port: int = 8000) -> str:
    """The same server in the official image, with the model directory mounted read-only."""
    name = PurePosixPath(model).name or "model"
    inside = f"/models/{name}"
    argv = [
        "docker",
        "run",
        "--rm",
        "--runtime",
        "nvidia",
        "--gpus",
        "all",
        "--ipc=host",
        "-p",
        f"{port}:8000",
        "-v",
        f"{model}:{inside}:ro",
        f"vllm/vllm-openai:v{version}",
        "--model",
        inside,
        *flag_args(flags),
    ]
    return shlex.join(argv)
