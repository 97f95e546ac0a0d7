"""vLLM flag values are read as vLLM reads them."""

from __future__ import annotations

from typing import Any

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.vocab import human_readable_int
from servetune.errors import ServetuneError
from servetune.plan.inputs import PlanInputs, inputs_from_flags as _inputs


def inputs_from_flags(flags: dict[str, Any]) -> PlanInputs:
    """The planner's inputs of flags as they enter: read into an EngineConfig (the one reading), then planned."""
    return _inputs(EngineConfig(model="m", flags=flags).flags)


@pytest.mark.parametrize(
    ("text", "value"),
    [("128k", 128_000), ("128K", 131_072), ("25.6k", 25_600), ("1M", 2**20), ("32768", 32768), (4096, 4096)],
)
def test_human_readable_int(text: object, value: int) -> None:
    assert human_readable_int(text) == value


def test_bad_numbers_say_how_to_write_them() -> None:
    with pytest.raises(ServetuneError, match="decimals"):
        human_readable_int("1.5K", "max-model-len")
    with pytest.raises(ServetuneError, match="lots"):
        human_readable_int("lots", "max-model-len")


def test_flags_by_vllm_names_and_aliases() -> None:
    inp = inputs_from_flags(
        {
            "max_model_len": "128K",
            "tp": 2,
            "kv-cache-dtype": "fp8",
            "--enable-prefix-caching": True,
            "speculative-config": '{"method": "mtp", "num_speculative_tokens": 2}',
            "limit-mm-per-prompt": {"image": 0, "video": 0},
            "max-num-batched-tokens": "8k",
        }
    )
    assert inp.max_model_len == 131072 and inp.tensor_parallel_size == 2 and inp.kv_fp8
    assert inp.enable_prefix_caching and inp.num_speculative_tokens == 2 and inp.speculative_method == "mtp"
    assert inp.language_model_only and inp.max_num_batched_tokens == 8000
    assert inputs_from_flags({"max-model-len": "auto"}).max_model_len == -1
    assert inputs_from_flags({"no-enable-prefix-caching": True}).enable_prefix_caching is False


def test_bad_flag_values() -> None:
    with pytest.raises(ServetuneError, match="speculative-config"):
        inputs_from_flags({"speculative-config": "{mtp"})
    with pytest.raises(ServetuneError, match="kv-cache-dtype"):
        inputs_from_flags({"kv-cache-dtype": "int2"})


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ({"tensor-parallel-size": 0}, "at least 1"),
        ({"pipeline-parallel-size": 0}, "at least 1"),
        ({"max-num-seqs": 0}, "at least 1"),
        ({"max-num-batched-tokens": 0}, "at least 1"),
        ({"gpu-memory-utilization": 1.5}, "(0, 1]"),
        ({"gpu-memory-utilization": "nan"}, "gpu-memory-utilization"),
        ({"block-size": 7}, "block size"),
        ({"block-size": 0}, "block size"),
        ({"max-model-len": 0}, "positive"),
    ],
)
def test_values_vllm_refuses_are_refused_before_any_work(flags: dict, says: str) -> None:
    # Issue 16: 0.1 planned (and emitted into `vllm serve`) --max-num-seqs 0, --block-size 7, ...
    with pytest.raises(ServetuneError, match=says.replace("(", r"\(").replace("]", r"\]")) as err:
        inputs_from_flags(flags)
    assert err.value.fix
