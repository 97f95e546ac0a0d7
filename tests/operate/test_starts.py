"""A start's expected time from the starts serve measured (operate/starts.py), and which config changes keep
vLLM's compile cache warm (engines/vllm.py `compile_identity`)."""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.vllm import compile_identity
from servetune.operate.evidence import Sized
from servetune.operate.starts import estimate, record

BLUE = EngineConfig(
    engine="vllm", model="/m/qwen", flags={"max-model-len": 32768, "gpu-memory-utilization": 0.45}, version="0.24.0"
)


def test_changes_vllm_leaves_out_of_its_cache_key_keep_a_restart_warm() -> None:
    same = compile_identity(BLUE)
    assert same is not None
    for flags in (
        {"gpu-memory-utilization": 0.3},
        {"enable-prefix-caching": True},
        {"served-model-name": "other"},
        {"num-gpu-blocks-override": 100},
        {"kv-cache-memory-bytes": 1 << 30},
    ):
        assert compile_identity(BLUE.with_flags(**{k.replace("-", "_"): v for k, v in flags.items()})) == same, flags
    assert compile_identity(BLUE.model_copy(update={"env": {"VLLM_CPU_KVCACHE_SPACE": "2"}})) == same
    for flags in ({"max-model-len": 16384}, {"max-num-batched-tokens": 2048}, {"max-num-seqs": 64}, {"dtype": "half"}):
        assert compile_identity(BLUE.with_flags(**{k.replace("-", "_"): v for k, v in flags.items()})) != same, flags
    assert compile_identity(BLUE.with_flags(enforce_eager=True)) is None


def _facts(cache: str | None) -> EngineFacts:
    return EngineFacts(engine="vllm", compile_cache=cache, compile_cache_key="8e3c435fed" if cache else None)


def test_the_estimate_is_a_measured_start_of_the_same_kind() -> None:
    measured = Sized(value=230.0, source="measured launch_s in a tuning folder")
    none = estimate([], BLUE, measured)
    assert none.expect == "cold" and none.seconds == 230.0 and none.basis == measured.source
    assert estimate([], BLUE).seconds is None
    cold = record("main", BLUE, _facts("cold"), 231.5)
    assert cold.identity == compile_identity(BLUE) and cold.compile_cache == "cold"
    again = estimate([cold], BLUE.with_flags(gpu_memory_utilization=0.3))
    assert again.expect == "warm" and again.seconds == 231.5 and "no warm start" in again.basis
    warm = record("main", BLUE, _facts("warm"), 75.2)
    assert estimate([cold, warm], BLUE).seconds == 75.2 and estimate([cold, warm], BLUE).expect == "warm"
    new_key = estimate([cold, warm], BLUE.with_flags(max_num_batched_tokens=2048))
    assert new_key.expect == "cold" and new_key.seconds == 231.5


def test_an_engine_without_a_compile_cache_is_estimated_by_its_starts() -> None:
    llama = EngineConfig(engine="llamacpp", model="/m/tiny.gguf", flags={"ctx-size": 4096})
    start = record("main", llama, EngineFacts(engine="llamacpp"), 1.2)
    assert start.identity is None and start.compile_cache is None
    guess = estimate([start], llama.with_flags(ctx_size=8192))
    assert guess.seconds == 1.2 and guess.expect is None
