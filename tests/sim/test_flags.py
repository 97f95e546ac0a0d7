"""sim-serve reads vLLM's flags, accepts the ones it does not model, and rejects bad values clearly."""

from __future__ import annotations

import pytest

from servetune.errors import ServetuneError
from servetune.engines.vocab import human_readable_int
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
