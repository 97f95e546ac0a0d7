"""`servetune plan` and `servetune plan-seeds` from the command line: answers, JSON, and errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servetune", *args], capture_output=True, text=True, timeout=60)


def test_plan_json_uses_vllm_flag_names() -> None:
    out = run(
        "plan",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "A100-80G-SXMx2",
        "--max-model-len",
        "128K",
        "--language-model-only",
        "--kv-cache-dtype",
        "fp8",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 2}',
        "--vllm-version",
        "0.24.0",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["feasible"] and plan["tensor_parallel_size"] == 2 and plan["max_model_len"] == 131072
    assert plan["block_size"] == 1600 and plan["log_lines"][0].startswith("GPU KV cache size: ")
    # the docker command works as pasted: a pinned image, a bind mount of a path to replace (never a named volume
    # for a bundled config's name), and a note saying so
    docker = plan["docker_command"]
    assert "vllm/vllm-openai:v0.24.0" in docker and "-v /path/to/qwen3.6-27b:/models/qwen3.6-27b:ro" in docker
    assert any("bundled with servetune" in n for n in plan["command_notes"])


def test_plan_table_from_a_measured_available_figure() -> None:
    out = run(
        "plan",
        "--model",
        "qwen3-14b",
        "--gpu",
        "H100",
        "--max_model_len",
        "32768",
        "--vllm-version",
        "0.11.0",
        "--available-kv",
        "6.51",
    )
    assert out.returncode == 0, out.stderr
    assert "GPU KV cache size: 42,656 tokens" in out.stdout
    assert "Maximum concurrency for 32,768 tokens per request: 1.30x" in out.stdout
    assert "vllm serve" in out.stdout and "docker run" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "/nonexistent/model", "--gpu", "H100"), "no config.json"),
        (("--model", "qwen3.6-27b", "--gpu", "Z9000"), "unknown GPU"),
        (("--model", "qwen3.6-27b", "--gpu", "A100x2", "--max-model-len", "32K"), "ambiguous: it comes as A100-40G"),
        (("--model", "qwen3.6-27b", "--gpu", "H100", "--max-model-len", "1.5K"), "decimals"),
        (("--model", "qwen3.6-27b", "--gpu", "H100", "--speculative-config", "{mtp"), "JSON"),
        (("--model", "qwen3.6-27b", "--gpu", "H100", "--vllm-version", "0.8.0"), "predates"),
    ],
)
def test_bad_input_is_one_message_no_traceback(args: tuple[str, ...], message: str) -> None:
    out = run("plan", *args)
    assert out.returncode == 2
    assert message in out.stderr and "fix:" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_infeasible_plan_is_an_answer_not_an_error() -> None:
    out = run("plan", "--model", "qwen3.6-27b", "--gpu", "H100x3", "--tp", "3")
    assert out.returncode == 0 and "DOES NOT FIT" in out.stdout and "not divisible" in out.stdout
    assert "These commands are the config as given, which does NOT fit" in out.stdout  # the serve lines are marked


def test_demo_plans_the_seed_systems() -> None:
    out = run("plan-seeds", "--json")
    assert out.returncode == 0, out.stderr
    plans = json.loads(out.stdout)
    assert len({key.split("-")[0] for key in plans}) == 5
    assert not plans["003-1xv100-bf16"]["feasible"] and plans["003-1xv100-int4"]["feasible"]
