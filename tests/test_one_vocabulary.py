"""`plan`, `estimate`, `sim-serve` and `tune` read one argv and one `--gpu` spelling the same way (issue 9).

One table of cases runs through all four commands in-process (`servetune.cli.main(argv)`): each prints what it
understood (`--show-config`; `tune --check --json` for an experiment whose `engine.command` carries the same
words and whose `hardware.gpu` is the same spelling), and the four must agree on the flags, the GPU model, the
GPU count and the parallel sizes. Bad words must fail the same way in all four.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from servetune.cli.entry import main

MODEL = "qwen3.6-27b"

CASES: list[tuple[str, str, dict[str, Any], dict[str, int]]] = [
    # (gpu spelling, vLLM words, flags understood, placement understood)
    ("H200", "", {}, {"gpus": 1, "tensor_parallel_size": 1}),
    ("A100-80G-SXM", "--tp 2 --max-model-len 32k", {"tensor-parallel-size": 2, "max-model-len": 32000},
     {"gpus": 2, "tensor_parallel_size": 2}),
    ("A100-80G-SXMx2", "--max-model-len 32K", {"max-model-len": 32768}, {"gpus": 2, "tensor_parallel_size": 2}),
    ("2xA100-80G-SXM", "-tp 2 --max-num-seqs 64", {"tensor-parallel-size": 2, "max-num-seqs": 64},
     {"gpus": 2, "tensor_parallel_size": 2}),
    ("H100x4", "--tensor-parallel-size=2", {"tensor-parallel-size": 2}, {"gpus": 4, "tensor_parallel_size": 2}),
    ("L40S*2", "--pp 2", {"pipeline-parallel-size": 2}, {"gpus": 2, "tensor_parallel_size": 1}),
    ("H200", "--kv-cache-dtype fp8 --no-enable-prefix-caching --gpu-memory-utilization 0.85",
     {"kv-cache-dtype": "fp8", "enable-prefix-caching": False, "gpu-memory-utilization": 0.85},
     {"gpus": 1, "tensor_parallel_size": 1}),
    ("H200x1", "--max_num_batched_tokens 2k --enforce-eager", {"max-num-batched-tokens": 2000, "enforce-eager": True},
     {"gpus": 1, "tensor_parallel_size": 1}),
    ("custom:mem=48,bw=864,tflops=362,cc=8.9x2", "--speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'",
     {"speculative-config": {"method": "mtp", "num_speculative_tokens": 2}}, {"gpus": 2, "tensor_parallel_size": 2}),
]  # fmt: skip

BAD: list[tuple[str, str, str]] = [
    # (gpu spelling, vLLM words, what every command's error must say)
    ("A100x2", "", "ambiguous"),
    ("H200", "--max-model-lenn 4096", "--max-model-len"),
    ("H200", "--tensor-parallel-size two", "whole number"),
    ("H200x0", "", "between 1 and"),
    ("B300-ultra", "", "unknown GPU"),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = 0
    try:
        main(argv)
    except SystemExit as done:
        code = int(done.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _experiment(tmp_path: Path, gpu: str, words: str) -> Path:
    path = tmp_path / "exp.yaml"
    exp = {
        "name": "one-vocabulary",
        "engine": {"engine": "vllm", "command": f"vllm serve {MODEL} {words}".strip()},
        "hardware": {"gpu": gpu},
        "variants": {"matrix": {"changes": {"same": {}}}},
    }
    path.write_text(yaml.safe_dump(exp))
    return path


def _understood(command: str, gpu: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """(exit code, what the command understood or its error text)."""
    split = shlex.split(words)
    if command == "plan":
        argv = ["plan", "--model", MODEL, "--gpu", gpu, *split, "--show-config"]
    elif command == "estimate":
        argv = ["estimate", MODEL, "--gpu", gpu, *split, "--concurrency", "1", "--show-config"]
    elif command == "sim-serve":
        argv = ["sim-serve", MODEL, "--gpu", gpu, *split, "--show-config"]
    else:
        argv = ["tune", str(_experiment(tmp_path, gpu, words)), "--check", "--json"]
    code, out, err = _run(argv, capsys)
    if code:
        return code, err
    data = json.loads(out)
    if command == "tune":
        variant = data["stages"][0]["variants"][0]
        return 0, {"flags": variant["config"]["flags"], **variant["placement"]}
    return 0, {
        k: data[k]
        for k in (
            "flags",
            *data.keys() & {"gpu", "gpus", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"},
        )
    }


COMMANDS = ("plan", "estimate", "sim-serve", "tune")


@pytest.mark.parametrize(("gpu", "words", "flags", "placement"), CASES)
def test_four_commands_read_one_argv_alike(
    gpu: str, words: str, flags: dict[str, Any], placement: dict[str, int], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    seen = {command: _understood(command, gpu, words, tmp_path, capsys) for command in COMMANDS}
    for command, (code, understood) in seen.items():
        assert code == 0, f"{command}: {understood}"
        assert understood["flags"] == flags, command
        assert {k: understood[k] for k in placement} == placement, command
    first = seen["plan"][1]
    assert all(understood == first for _, understood in seen.values()), seen


@pytest.mark.parametrize(("gpu", "words", "said"), BAD)
def test_four_commands_refuse_bad_words_alike(
    gpu: str, words: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in COMMANDS:
        code, err = _understood(command, gpu, words, tmp_path, capsys)
        assert code == 2, f"{command} accepted {gpu!r} {words!r}"
        assert said in err and "Traceback" not in err, f"{command}: {err}"


# ---- flags are read once, where they enter ------------------------------------------------------------------------
READERS = {"engines/vocab.py", "engines/config.py", "tune/schema/checks.py"}
"""Where flags enter: the vocabulary itself, an `EngineConfig` being built, and an experiment being read."""


def test_flags_are_normalised_only_where_they_enter() -> None:
    """The planner, the command lines, deploy, the simulator and the variants each normalised a config's flags
    again where they used them; now a config holds canonical flags by construction and nothing reads them twice."""
    import ast

    import servetune

    src = Path(servetune.__file__).parent
    callers = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == (
                "normalize_flags"
            ):
                callers.add(str(path.relative_to(src)))
    assert callers <= READERS, sorted(callers - READERS)


def test_an_engine_config_holds_canonical_flags_whatever_it_was_given() -> None:
    from servetune.engines.config import EngineConfig

    cfg = EngineConfig(
        model="m", flags={"max_model_len": "32k", "-tp": 2, "no-enable-prefix-caching": True, "made-up": "x"}
    )
    assert cfg.flags == {
        "max-model-len": 32000,
        "tensor-parallel-size": 2,
        "enable-prefix-caching": False,
        "made-up": "x",  # kept as given: refusing it is the parser's job, which knows the opt-in
    }
    assert cfg == EngineConfig(model="m", flags=cfg.flags) and cfg.key() == EngineConfig(**cfg.model_dump()).key()
    assert cfg.with_flags(max_num_seqs=8, tp=4).flags["tensor-parallel-size"] == 4
    assert cfg.with_flags(max_num_seqs=8).flags["max-num-seqs"] == 8


def test_an_experiment_holds_canonical_flags_in_its_base_changes_grid_and_search() -> None:
    from servetune.tune.schema.loader import parse_experiment
    from servetune.tune.schema.variants import base_config, grid_variants, matrix_variants

    head = f"name: x\nengine: {{engine: vllm, model: {MODEL}, flags: {{max_model_len: 32k, tp: 1}}}}\n"
    exp = parse_experiment(head + "variants:\n  matrix:\n    changes:\n      a: {no-enable-prefix-caching: true}\n")
    assert exp.engine.flags == {"max-model-len": 32000, "tensor-parallel-size": 1}
    assert exp.variants.matrix is not None
    assert exp.variants.matrix.changes["a"].flags == {"enable-prefix-caching": False}
    base = base_config(exp)
    _, changed = matrix_variants(base, exp.client, exp.variants.matrix)
    assert changed.config.flags == {**base.flags, "enable-prefix-caching": False}
    assert changed.changes == {"enable-prefix-caching": False}

    exp = parse_experiment(head + "variants:\n  grid:\n    max_num_seqs: [8, 16]\n    max-model-len: [4k, 8K]\n")
    assert exp.variants.grid is not None
    assert exp.variants.grid.flags == {"max-num-seqs": [8, 16], "max-model-len": [4000, 8192]}
    names = [v.name for v in grid_variants(base_config(exp), exp.client, exp.variants.grid)]
    assert names[0] == "max-num-seqs=8,max-model-len=4000"
    with pytest.raises(Exception, match="repeats"):  # one value in two spellings is one variant twice
        parse_experiment(head + "variants:\n  grid:\n    max-model-len: [32k, 32000]\n")

    search = "variants:\n  search:\n    budget_gpu_minutes: 5\n    space:\n      max_num_seqs: {int: [8, 64]}\n"
    exp = parse_experiment(head + search + "      no-enable-prefix-caching: {choice: [true, false]}\n")
    assert exp.variants.search is not None
    assert list(exp.variants.search.space) == ["max-num-seqs", "enable-prefix-caching"]
    assert exp.variants.search.space["enable-prefix-caching"].choice == [False, True]
