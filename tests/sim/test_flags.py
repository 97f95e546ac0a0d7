"""sim-serve and estimate read vLLM's flags: the ones that change nothing are named in the log, unknown ones and
bad values are clear errors, `--gpu` takes `NAME[xN]`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from servetune.engines.vocab import human_readable_int
from servetune.errors import ServetuneError
from servetune.sim.flags import parse_sim_args


def test_vllm_flags_and_sim_flags() -> None:
    a = parse_sim_args(
        [
            "/m",
            "-tp",
            "2",
            "--max-model-len",
            "128K",
            "--max-num-seqs",
            "4",
            "--no-enable-prefix-caching",
            "--speculative-config",
            '{"method": "mtp", "num_speculative_tokens": 3, "acceptance_rate": 0.7}',
            "--gpu",
            "A100-80G-SXM",
            "--time-scale",
            "5",
            "--reasoning-parser",
            "qwen3",
            "--trust-remote-code",
        ]
    )
    assert (a.model, a.tensor_parallel_size, a.max_model_len, a.max_num_seqs) == ("/m", 2, 131072, 4)
    assert a.enable_prefix_caching is False and a.num_speculative_tokens == 3 and a.acceptance_rate == 0.7
    assert (a.gpu, a.time_scale) == ("A100-80G-SXM", 5.0)
    assert a.ignored == ["--reasoning-parser qwen3", "--trust-remote-code"]


def test_lengths_and_errors() -> None:
    assert human_readable_int("128k") == 128000 and human_readable_int("32768") == 32768
    with pytest.raises(ServetuneError):
        human_readable_int("lots")
    with pytest.raises(ServetuneError):
        parse_sim_args(["/m", "--speculative-config", "{not json"])
    with pytest.raises(ServetuneError):
        parse_sim_args(["--max-num-seqs", "4"])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--max-num-seq", "4"], "did you mean --max-num-seqs"),
        (["--made-up-flag"], "--made-up-flag is not a sim-serve"),
        (["extra-word"], "extra-word"),
    ],
)
def test_unknown_flags_are_errors_with_a_suggestion(argv: list[str], says: str) -> None:
    with pytest.raises(ServetuneError) as err:
        parse_sim_args(["/m", *argv])
    assert says in str(err.value)
    assert "--pass-unknown-flags" in str(err.value) or not argv[0].startswith("-")


def test_tp_is_the_shorthand_every_command_takes_and_unknown_flags_pass_only_by_opt_in() -> None:
    # 0.1: `estimate --tp 2` ran on one GPU without a word (argparse's parse_known_args swallowed --tp).
    assert parse_sim_args(["/m", "--tp", "2"]).tensor_parallel_size == 2
    a = parse_sim_args(["/m", "--made-up", "2", "--pass-unknown-flags"])
    assert a.ignored == ["--made-up 2"] and a.tensor_parallel_size == 1
    assert parse_sim_args(["/m", "--made-up", "2"], allow_unknown=True).ignored == ["--made-up 2"]
    assert parse_sim_args(["/m", "--max-logprobs", "5"]).ignored == ["--max-logprobs 5"], "vLLM's, not modelled"


def test_gpu_takes_a_count() -> None:
    a = parse_sim_args(["/m", "--gpu", "A100-80G-SXMx2"])
    assert (a.gpu, a.tensor_parallel_size) == ("A100-80G-SXMx2", 2)
    assert parse_sim_args(["/m", "--gpu", "2xH200", "-tp", "2"]).tensor_parallel_size == 2
    with pytest.raises(ServetuneError, match="needs 4 GPUs, but 2 given"):
        parse_sim_args(["/m", "--gpu", "H200x2", "-tp", "4"])
    assert parse_sim_args(["/m", "--gpu", "H200", "-tp", "4"]).tensor_parallel_size == 4, "uncounted: TP decides"
    with pytest.raises(ServetuneError, match="ambiguous"):
        parse_sim_args(["/m", "--gpu", "A100x2"])


def servetune(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "servetune", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_estimate_runs_on_the_gpus_plan_counts() -> None:
    """`estimate` with `--tp 2` on one named GPU, or with the `NAMExN` spelling, simulates the KV cache that
    `plan` computes for two GPUs (more than twice one GPU's: the weights are split)."""
    flags = ("--max-model-len", "128K", "--language-model-only")
    load = ("--concurrency", "1", "--num-requests", "2", "--input-len", "16", "--output-len", "4")

    def plan_kv(gpu: str, *more: str) -> int:
        return int(
            json.loads(servetune("plan", "--model", "qwen3.6-27b", "--gpu", gpu, *flags, *more, "--json"))[
                "kv_cache_tokens"
            ]
        )

    two = plan_kv("A100-80G-SXMx2", "-tp", "2")
    assert two > 2 * plan_kv("A100-80G-SXM")
    for gpu, tp in (("A100-80G-SXM", "--tp"), ("A100-80G-SXMx2", "-tp")):
        assert f"KV cache {two:,} tokens" in servetune("estimate", "qwen3.6-27b", "--gpu", gpu, *flags, tp, "2", *load)


@pytest.mark.parametrize(
    "argv",
    [
        ["--max-num-seqs", "0"],
        ["--max-num-seqs", "many"],
        ["--max-num-batched-tokens", "0"],
        ["--block-size", "0"],
        ["--tensor-parallel-size", "0"],
        ["--gpu-memory-utilization", "nan"],
        ["--gpu-memory-utilization", "1.5"],
        ["--time-scale", "0"],
        ["--max-model-len", "0"],
        ["--acceptance-rate", "2"],
        ["--speculative-config", "[1, 2]"],
        ["--speculative-config", '{"num_speculative_tokens": "x"}'],
    ],
)
def test_bad_values_are_errors_naming_the_flag(argv: list[str]) -> None:
    with pytest.raises(ServetuneError) as err:
        parse_sim_args(["/m", *argv])
    assert argv[0].lstrip("-").split("-")[0] in str(err.value)
