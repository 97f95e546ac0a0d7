"""Typed config → argv with each engine's own flag names; env defaults; adapters by name."""

from __future__ import annotations

import sys

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.registry import adapter_for
from servetune.errors import ServetuneError


def test_adapters_write_flags_through_the_vocabulary(tmp_path) -> None:
    cfg = EngineConfig(
        model=str(tmp_path),
        flags={
            "max-model-len": 4096,
            "enable-prefix-caching": False,
            "dtype": None,
            "speculative-config": {"method": "mtp", "num_speculative_tokens": 2},
        },
    )
    argv = adapter_for("vllm").argv(cfg, "127.0.0.1", 8000)
    assert argv[-5:] == [
        "--max-model-len",
        "4096",
        "--no-enable-prefix-caching",
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":2}',
    ]
    sglang = EngineConfig(engine="sglang", model="m", flags={"disable-radix-cache": True, "enable-metrics": False})
    assert adapter_for("sglang").argv(sglang, "127.0.0.1", 1)[-1] == "--disable-radix-cache", "SGLang has no --no-x"


def test_vllm_argv_and_env(tmp_path) -> None:
    cfg = EngineConfig(
        model=str(tmp_path), served_model_name="m", flags={"max-model-len": 2048}, env={"VLLM_CPU_KVCACHE_SPACE": "2"}
    )
    a = adapter_for("vllm")
    argv = a.argv(cfg, "127.0.0.1", 8123)
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[3:] == [
        "--model",
        str(tmp_path),
        "--served-model-name",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--max-model-len",
        "2048",
    ]
    env = a.env(cfg, "127.0.0.1")
    assert env["VLLM_HOST_IP"] == "127.0.0.1" and env["HF_HUB_OFFLINE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"  # the user's value wins


def test_vllm_env_leaves_hub_ids_online() -> None:
    env = adapter_for("vllm").env(EngineConfig(model="Qwen/Qwen3-32B"), "0.0.0.0")
    assert "HF_HUB_OFFLINE" not in env and "VLLM_HOST_IP" not in env


def test_explicit_kv_bytes_is_not_overridden_on_cpu() -> None:
    env = adapter_for("vllm").env(EngineConfig(model="x", flags={"kv-cache-memory-bytes": "4M"}), "127.0.0.1")
    assert "VLLM_CPU_KVCACHE_SPACE" not in env


def test_llamacpp_argv_uses_llama_server_names(monkeypatch) -> None:
    monkeypatch.delenv("SERVETUNE_LLAMA_SERVER", raising=False)
    cfg = EngineConfig(
        engine="llamacpp",
        model="/m.gguf",
        served_model_name="tiny",
        flags={"ctx-size": 8192, "parallel": 4, "metrics": True, "cont-batching": False},
    )
    argv = adapter_for("llamacpp").argv(cfg, "127.0.0.1", 9000)
    assert argv[:3] == [sys.executable, "-m", "servetune.engines.llamacpp_server"]
    assert argv[3:] == [
        "-m",
        "/m.gguf",
        "--alias",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
        "--ctx-size",
        "8192",
        "--parallel",
        "4",
        "--metrics",
        "--no-cont-batching",
    ]
    monkeypatch.setenv("SERVETUNE_LLAMA_SERVER", "/opt/llama-server")
    assert adapter_for("llamacpp").argv(cfg, "127.0.0.1", 9000)[0] == "/opt/llama-server"


def test_sglang_argv_omits_false_booleans() -> None:
    cfg = EngineConfig(
        engine="sglang",
        model="/models/q",
        served_model_name="q",
        flags={"mem-fraction-static": 0.85, "disable-radix-cache": True, "enable-metrics": False, "tp-size": 2},
    )
    argv = adapter_for("sglang").argv(cfg, "127.0.0.1", 30000)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert argv[3:] == [
        "--model-path",
        "/models/q",
        "--served-model-name",
        "q",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--mem-fraction-static",
        "0.85",
        "--disable-radix-cache",
        "--tp-size",
        "2",
    ]


def test_sim_is_launched_as_servetune_with_vllm_flags() -> None:
    cfg = EngineConfig(
        engine="sim",
        model="/cfg",
        served_model_name="q",
        flags={"max-model-len": 32000, "enable-prefix-caching": False},
    )
    argv = adapter_for("sim").argv(cfg, "127.0.0.1", 8000)
    assert argv == [
        sys.executable,
        "-m",
        "servetune",
        "sim-serve",
        "--model",
        "/cfg",
        "--served-model-name",
        "q",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--max-model-len",
        "32000",
        "--no-enable-prefix-caching",
    ]
    assert adapter_for("sim").version().startswith("servetune-sim-")


def test_unknown_engine_is_a_user_error() -> None:
    with pytest.raises(ServetuneError, match="unknown engine"):
        adapter_for("tgi")


def test_versions_are_known_without_starting() -> None:
    pytest.importorskip("xllamacpp")
    assert adapter_for("llamacpp").version().startswith("xllamacpp-")


def test_cli_engine_words_go_through_the_vocabulary() -> None:
    from servetune.engines.vocab import parse_argv

    words = ["--max-model-len", "4096", "--enforce-eager", "-tp", "2", "--seed", "-1"]
    assert parse_argv("vllm", words) == {
        "max-model-len": 4096,
        "enforce-eager": True,
        "tensor-parallel-size": 2,
        "seed": -1,
    }
    with pytest.raises(ServetuneError):
        parse_argv("vllm", ["oops"])
    assert parse_argv("vllm", ["--x=1"], allow_unknown=True) == {"x": "1"}
