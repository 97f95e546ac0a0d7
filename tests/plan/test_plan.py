"""Plans: ledger numbers, versions, verdicts with reasons and fixes, hardware rules, command lines."""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.hardware.catalog import get_gpu
from servetune.hardware.gpus import parse_gpu_arg
from servetune.model.bundled import bundled_model
from servetune.plan.api import Plan, plan_for
from servetune.plan.placement import place


def plan(model: str, gpu: str, version: str | None = None, **flags: object) -> Plan:
    cfg = EngineConfig(model=str(bundled_model(model)), flags={k.replace("_", "-"): v for k, v in flags.items()})
    placed = place(parse_gpu_arg(gpu), cfg.flags)
    return plan_for(cfg, placed.gpu, placed.gpus, vllm_version=version)


def test_qwen36_tp2_layout_matches_the_reference_table() -> None:
    p = plan("qwen3.6-27b", "A100-80G-SXMx2", max_model_len="128K", language_model_only=True)
    assert p.feasible and p.tensor_parallel_size == 2
    assert (p.block_size, p.layout.bytes_per_block, p.blocks_per_request) == (784, 25_690_112, 174)  # PC on (0.33)
    # 26.90 B params / 2 GPUs in bf16 = 25.07 GiB, + the MRoPE cos/sin cache 4 x 262,144 x 64 x 2 B per GPU
    assert round(p.weights_bytes_per_gpu / 1024**3, 2) == 25.20
    assert p.blocks_for(1) == 1 + 3 * 2 and p.concurrency_for(131072) == p.max_concurrency
    assert p.max_concurrency_low < p.max_concurrency < p.max_concurrency_high  # overhead uncertainty


def test_version_differences() -> None:
    old = plan("qwen3.6-27b", "A100-80G-SXMx2", "0.24.0", max_model_len="128K", language_model_only=True)
    new = plan("qwen3.6-27b", "A100-80G-SXMx2", "0.33.0", max_model_len="128K", language_model_only=True)
    v011 = plan("qwen3.6-27b", "A100-80G-SXMx2", "0.11.0", max_model_len="128K", language_model_only=True)
    assert not old.prefix_caching and new.prefix_caching  # hybrids: off in 0.24, on from 0.26
    assert (old.blocks_per_request, new.blocks_per_request) == (171, 174)
    assert len(old.log_lines) == 2 and len(new.log_lines) == 1
    assert v011.gpu_memory_utilization == 0.9 and new.gpu_memory_utilization == 0.92
    assert v011.overhead.cudagraph_bytes == 0  # graphs were captured after the KV budget before 0.20


def test_mtp_and_fp8_kv_change_blocks() -> None:
    bf16 = plan(
        "qwen3.6-27b",
        "A100-80G-SXMx2",
        "0.24.0",
        max_model_len="128K",
        language_model_only=True,
        speculative_config={"method": "mtp", "num_speculative_tokens": 2},
    )
    fp8 = plan(
        "qwen3.6-27b", "A100-80G-SXMx2", "0.24.0", max_model_len="128K", language_model_only=True, kv_cache_dtype="fp8"
    )
    assert bf16.block_size == 800 and bf16.layout.group_size == 17 and bf16.blocks_per_request == 173
    assert fp8.block_size == 1568 and fp8.blocks_per_request == 87
    assert "attention-backend" in fp8.serve_flags  # A100: FlashAttention cannot read FP8 KV
    assert any("TRITON_ATTN" in n for n in fp8.notes)


def test_gpu_dependent_defaults() -> None:
    a100 = plan("qwen3-32b", "A100-80G", max_model_len=8192)
    h200 = plan("qwen3-32b", "H200", "0.24.0", max_model_len=8192)
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert (h200.max_num_batched_tokens, h200.max_num_seqs) == (8192, 1024)


def test_does_not_fit_says_by_how_much_and_how_to_fix() -> None:
    p = plan("qwen2-7b", "A10G")  # default max_model_len 131072
    assert not p.feasible
    assert "131,072" in p.reasons[0] and "largest max_model_len that fits" in p.reasons[0]
    changes = {f.change for f in p.fixes}
    assert any(c.startswith("max-model-len") for c in changes)
    assert any(c.startswith("INT4") for c in changes) and any(c.startswith("tensor-parallel-size 2") for c in changes)
    assert all(f.max_concurrency >= 1 for f in p.fixes)


def test_v100_has_no_bf16_and_int4_fix() -> None:
    p = plan("qwen3.6-27b", "V100-32G", max_model_len=32768, language_model_only=True)
    assert not p.feasible and "short before any KV cache" in p.reasons[0]
    assert p.serve_flags["dtype"] == "float16" and any("no BF16" in n for n in p.notes)
    assert any("FlashAttention" in n for n in p.notes)
    int4 = [f for f in p.fixes if f.change.startswith("INT4")]
    assert int4 and int4[0].flags["quantization"] == "gptq"  # AWQ kernels need CC 7.5
    refused = plan("qwen3.6-27b", "V100-32G", max_model_len=32768, dtype="bfloat16", quantization="gptq")
    assert any("no BF16" in r for r in refused.reasons)
    awq = plan("qwen3.6-27b", "V100-32G", max_model_len=32768, quantization="awq")
    assert any("awq weights need compute capability" in r for r in awq.reasons)


def test_impossible_tp_says_why() -> None:
    p = plan("qwen3.6-27b", "H100x3", tensor_parallel_size=3)
    assert any("not divisible by tensor-parallel-size 3" in r and "valid sizes: 1, 2, 4, 8" in r for r in p.reasons)
    p = plan("qwen3.6-27b", "H100x2", tensor_parallel_size=4)
    assert any("needs 4 GPUs" in r for r in p.reasons)


def test_kv_heads_replicate_beyond_tp() -> None:
    p = plan("qwen3.6-27b", "H100x8", "0.24.0", tensor_parallel_size=8, max_model_len="128K", language_model_only=True)
    assert p.layout.attn_page_bytes_per_token == 1024 and p.block_size == 400 and p.blocks_per_request == 331


def test_moe_mla_and_pp_plan() -> None:
    ds = plan("deepseek-v3", "H200x8", max_model_len=32768)
    assert ds.feasible and ds.layout.attn_page_bytes_per_token == 576 * 2 and ds.block_size == 64
    mix = plan("mixtral-8x7b", "A100-80Gx4", max_model_len=32768, pipeline_parallel_size=2, tensor_parallel_size=2)
    assert mix.feasible and mix.layout.group_size == 16  # 32 layers over 2 stages
    nxt = plan("qwen3-next-80b-a3b", "H200x2", max_model_len="128K")
    assert nxt.feasible and nxt.layout.block_size_forced


def test_auto_max_model_len_and_given_kv() -> None:
    p = plan("qwen2-7b", "A10G", max_model_len="auto")
    assert p.feasible and p.max_model_len < 131072
    given = plan_for(
        EngineConfig(model=str(bundled_model("qwen2-7b"))), get_gpu("A10G"), available_kv_bytes=8 * 1024**3
    )
    assert given.available_kv_source == "given" and given.available_kv_bytes == 8 * 1024**3


def test_commands_use_vllm_spelling() -> None:
    p = plan(
        "qwen3.6-27b",
        "A100-80G-SXMx2",
        "0.24.0",
        max_model_len="128K",
        language_model_only=True,
        speculative_config={"method": "mtp", "num_speculative_tokens": 2},
        enable_prefix_caching=False,
    )
    lines = [line.strip(" \\") for line in p.serve_command.splitlines()]
    assert lines[0] == "vllm serve /path/to/qwen3.6-27b", "a bundled config is not a checkpoint: a placeholder"
    assert "--served-model-name qwen3.6-27b" in lines
    assert "--tensor-parallel-size 2" in lines and "--max-model-len 131072" in lines
    assert "--no-enable-prefix-caching" in lines and "--language-model-only" in lines
    assert """--speculative-config '{"method":"mtp","num_speculative_tokens":2}'""" in lines
    assert "vllm/vllm-openai:v0.24.0" in p.docker_command and "-v /path/to/qwen3.6-27b:" in p.docker_command
    assert any("bundled with servetune" in note for note in p.command_notes)


def test_max_model_len_beyond_the_model_needs_the_env_var(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = plan("qwen3-32b", "H200", max_model_len="128K")
    assert not p.feasible and any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in r for r in p.reasons)
    allowed = plan_for(
        EngineConfig(
            model=str(bundled_model("qwen3-32b")),
            flags={"max-model-len": "128K"},
            env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
        ),
        get_gpu("H200"),
    )
    assert allowed.feasible
    import json

    cfg = json.loads((bundled_model("qwen3-32b") / "config.json").read_text())  # type: ignore[operator]
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    yarn = plan_for(EngineConfig(model=str(tmp_path), flags={"max-model-len": "128K"}), get_gpu("H200"))
    assert yarn.feasible and yarn.max_model_len == 131072


def test_fix_reads_as_a_sentence() -> None:
    p = plan("qwen2-7b", "A10G")
    assert str(p.fixes[0]).count("x at max_model_len") == 1


def test_sliding_window_caps_blocks_per_request() -> None:
    from pathlib import Path

    cfg = Path(__file__).parents[1] / "model" / "configs" / "mistral-7b-v0.1.json"
    p = plan_for(EngineConfig(model=str(cfg), flags={"max-model-len": 32768}), get_gpu("L40S"))
    # SlidingWindowSpec: cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), 16) + 1
    assert p.blocks_per_request == (4095 + 2048 + 15) // 16 + 1 == 385
    assert p.blocks_for(100) == 8  # short requests hold only what they use


def test_v011_turns_hybrid_prefix_caching_off() -> None:
    p = plan("qwen3.6-27b", "H200", "0.11.0", max_model_len=32768, enable_prefix_caching=True)
    assert not p.prefix_caching and p.blocks_per_request == 42 + 3


def test_weights_per_gpu_match_vllm_model_loading_line() -> None:
    """vllm-project/vllm#10517 (RTX 3090): Llama-3.1-8B "Loading model weights took 14.9888 GB" (GiB): the
    8.03 B bf16 parameters plus RoPE's cos/sin cache (131,072 positions x 128 dims x 2 B)."""
    from pathlib import Path

    cfg = Path(__file__).parents[1] / "model" / "configs" / "llama-3.1-8b.json"
    p = plan_for(
        EngineConfig(model=str(cfg), flags={"max-model-len": 20000}), get_gpu("RTX-3090"), vllm_version="0.11.0"
    )
    assert f"{p.weights_bytes_per_gpu / 1024**3:.4f}" == "14.9888"


def test_mamba_ssm_cache_dtype_halves_the_state_and_the_block() -> None:
    """Reference table: TP1 bf16 KV with the recurrent state in bf16 instead of the config's float32 -> block 400."""
    p = plan("qwen3.6-27b", "H200", "0.24.0", max_model_len="128K", mamba_ssm_cache_dtype="bfloat16")
    assert p.layout.mamba_page_unpadded_bytes == 1_634_304 and p.block_size == 400 and p.blocks_per_request == 331
