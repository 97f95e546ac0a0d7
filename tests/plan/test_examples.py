"""The committed examples (examples/plans/*.json) are what the planner says today."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.vocab import parse_argv
from servetune.hardware.gpus import parse_gpu_arg
from servetune.plan.api import plan_for
from servetune.plan.placement import place

EXAMPLES = Path(__file__).parents[2] / "examples" / "plans"
KEYS = ("feasible", "block_size", "num_blocks", "blocks_per_request", "log_lines", "serve_command", "reasons")


def _replan(txt: Path) -> dict:
    argv = shlex.split(txt.read_text().splitlines()[0].removeprefix("$ servetune plan "))
    opts: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--model", "--gpu", "--vllm-version"):
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    flags = parse_argv("vllm", rest)
    placed = place(parse_gpu_arg(opts["--gpu"]), flags)
    plan = plan_for(
        EngineConfig(model=opts["--model"], flags=flags),
        placed.gpu,
        placed.gpus,
        vllm_version=opts.get("--vllm-version"),
    )
    return plan.model_dump(mode="json")


@pytest.mark.parametrize(
    "txt", sorted(p for p in EXAMPLES.glob("*.txt") if p.name != "summary.txt"), ids=lambda p: p.stem
)
def test_committed_example_is_current(txt: Path) -> None:
    committed = json.loads(txt.with_suffix(".json").read_text())
    fresh = _replan(txt)
    assert {k: fresh[k] for k in KEYS} == {k: committed[k] for k in KEYS}, "run: bash examples/plans/run.sh"
