"""SGLang cannot run on this CPU-only machine (it needs CUDA/ROCm): its log parsing is tested on log text in
the formats SGLang prints (weights, KV pool, graph capture, scheduler limits), its argv in test_argv.py."""

from __future__ import annotations

from servetune.engines.sglang import parse_sglang_log

LOG = """\
[2026-03-11 13:52:58] server_args=ServerArgs(model_path='/models/Qwen3-32B', tp_size=1, \
mem_fraction_static=0.88, chunked_prefill_size=8192, page_size=1, attention_backend='fa3', context_length=None)
[2026-03-11 13:53:21 TP0] Load weight end. elapsed=23.18 s, type=Qwen3ForCausalLM, dtype=torch.bfloat16, \
avail mem=32.02 GB, mem usage=61.03 GB.
[2026-03-11 13:53:23 TP0] KV Cache is allocated. #tokens: 383872, K size: 11.72 GB, V size: 11.72 GB
[2026-03-11 13:53:23 TP0] Memory pool end. avail mem=7.82 GB
[2026-03-11 13:53:32 TP0] Capture cuda graph end. Time elapsed: 8.04 s. mem usage=0.80 GB. avail mem=6.30 GB.
[2026-03-11 13:53:33 TP0] max_total_num_tokens=383872, chunked_prefill_size=8192, max_prefill_tokens=16384, \
max_running_requests=48, context_len=40960, available_gpu_mem=6.30 GB
[2026-03-11 13:53:33] The server is fired up and ready to roll!
"""


def test_sglang_facts() -> None:
    facts = parse_sglang_log(LOG)
    assert facts.engine == "sglang"
    assert facts.dtype == "bfloat16"
    assert (facts.weights_gib, facts.weights_load_s) == (61.03, 23.18)
    assert facts.kv_cache_tokens == 383872
    assert facts.available_kv_gib == 23.44
    assert (facts.cuda_graph_capture_s, facts.cuda_graph_gib) == (8.04, 0.8)
    assert facts.max_model_len == 40960
    assert facts.max_num_batched_tokens == 8192
    assert facts.max_concurrency == 48.0
    assert facts.attention_backend == "fa3"
    assert facts.block_size == 1


def test_sglang_older_lines() -> None:
    facts = parse_sglang_log(
        "[2025-11-04 05:27:13 DP0 TP0 EP0] Load weight end. type=DeepseekV3ForCausalLM, "
        "dtype=torch.bfloat16, avail mem=75.11 GB, mem usage=107.07 GB.\n"
        "[2025-11-04 05:27:13 DP0 TP0 EP0] KV Cache is allocated. #tokens: 524288, "
        "KV size: 17.16 GB\n"
    )
    assert facts.weights_gib == 107.07 and facts.weights_load_s is None
    assert facts.kv_cache_tokens == 524288 and facts.available_kv_gib == 17.16
