"""The commands a user pastes: one emitter for `vllm serve`, `docker run`, `llama-server` and SGLang."""

from __future__ import annotations

import shlex

import pytest

from servetune.engines.commands import Command, docker_command, is_secret_name, serve_command
from servetune.engines.config import EngineConfig
from servetune.engines.vocab import parse_argv
from servetune.errors import ServetuneError

CANARY = "sk-canary-7f3a9"


def _vllm(**over) -> EngineConfig:
    base = {
        "engine": "vllm",
        "model": "/data/Qwen3.6-27B",
        "version": "0.24.0",
        "flags": {"max-model-len": "128K", "enable-prefix-caching": False, "tp": 2},
    }
    return EngineConfig(**{**base, **over})


def _words(cmd: Command) -> list[str]:
    """The shell words of `text` (what the shell runs after joining the continued lines)."""
    return shlex.split(cmd.text.replace("\\\n", " "))


def test_serve_command_writes_vllm_serve_with_canonical_flags_one_per_line():
    cmd = serve_command(_vllm())
    assert cmd.argv == (
        "vllm", "serve", "/data/Qwen3.6-27B",
        "--max-model-len", "131072",
        "--no-enable-prefix-caching",
        "--tensor-parallel-size", "2",
    )  # fmt: skip
    assert cmd.text.splitlines() == [
        "vllm serve /data/Qwen3.6-27B \\",
        "  --max-model-len 131072 \\",
        "  --no-enable-prefix-caching \\",
        "  --tensor-parallel-size 2",
    ]
    assert _words(cmd) == list(cmd.argv)
    assert parse_argv("vllm", list(cmd.argv[3:]), version="0.24.0") == {
        "max-model-len": 131072,
        "enable-prefix-caching": False,
        "tensor-parallel-size": 2,
    }
    assert cmd.notes == ()


def test_docker_command_pins_the_image_and_bind_mounts_the_model_read_only():
    """Issue 9: the recommendation used `:latest` although the version is known, and a named volume."""
    cmd = docker_command(_vllm(served_model_name="qwen"), port=8001)
    words = _words(cmd)
    assert words[:3] == ["docker", "run", "-d"]
    assert "vllm/vllm-openai:v0.24.0" in words and not any(w.endswith(":latest") for w in words)
    assert words[words.index("-v") + 1] == "/data/Qwen3.6-27B:/models/Qwen3.6-27B:ro"
    assert "--ipc=host" in words and words[words.index("-p") + 1] == "8001:8000"
    assert words[words.index("--gpus") - 1 : words.index("--gpus") + 2] == ["nvidia", "--gpus", "all"]
    image = words.index("vllm/vllm-openai:v0.24.0")
    assert words[image + 1] == "/models/Qwen3.6-27B"  # the in-container path, positional (vllm serve MODEL)
    assert words[image + 2 : image + 4] == ["--served-model-name", "qwen"]
    assert "--max-model-len" in words[image:] and "131072" in words[image:]
    assert cmd.notes == ()


def test_docker_command_with_a_host_dir_for_a_hugging_face_id_keeps_the_served_name():
    cmd = docker_command(_vllm(model="Qwen/Qwen3-8B"), host_model_dir="/srv/models/qwen3-8b/")
    words = _words(cmd)
    assert "/srv/models/qwen3-8b/:/models/qwen3-8b:ro" in words
    image = next(i for i, w in enumerate(words) if w.startswith("vllm/vllm-openai:"))
    assert words[image + 1 : image + 4] == ["/models/qwen3-8b", "--served-model-name", "Qwen/Qwen3-8B"]


def test_docker_command_for_a_hugging_face_id_mounts_the_cache_not_a_volume():
    words = _words(docker_command(_vllm(model="Qwen/Qwen3-8B")))
    mount = words[words.index("-v") + 1]
    assert mount == "~/.cache/huggingface:/root/.cache/huggingface"
    assert "Qwen/Qwen3-8B" in words and "--served-model-name" not in words


def test_docker_command_is_pinned_even_when_the_version_is_unknown():
    """Never `:latest`: without a version, the newest release servetune checked the flags against, said so."""
    cmd = docker_command(_vllm(version=None))
    assert "vllm/vllm-openai:v0.32.0" in cmd.argv and not any(w.endswith(":latest") for w in cmd.argv)
    assert any("names no vllm release" in n and "pin the release you measured" in n for n in cmd.notes)
    assert "vllm/vllm-openai:v0.32.0" in docker_command(_vllm(version="0.32.0+cpu")).argv
    assert "my/image:1" in docker_command(_vllm(), image="my/image:1").argv


def test_docker_command_dev_run_is_removed_after_and_other_engines_are_refused():
    words = _words(docker_command(_vllm(), production=False, gpus=2, container_name="t"))
    assert words[:3] == ["docker", "run", "--rm"] and "--restart" not in words
    assert words[words.index("--gpus") + 1] == "2" and words[words.index("--name") + 1] == "t"
    with pytest.raises(ServetuneError, match="serve_command"):
        docker_command(EngineConfig(engine="llamacpp", model="/m.gguf"))
    with pytest.raises(ServetuneError, match="port"):
        docker_command(_vllm(), port=0)


def test_dummy_load_format_is_dropped_from_production_with_a_note():
    """Issue 9: the recommendation copied `--load-format dummy` into the production command."""
    cfg = _vllm(flags={"load-format": "dummy", "max-model-len": 4096})
    for cmd in (serve_command(cfg), docker_command(cfg)):
        assert "dummy" not in cmd.argv and "--load-format" not in cmd.argv
        assert any("--load-format dummy" in n for n in cmd.notes)
    dev = serve_command(cfg, production=False)
    assert dev.argv[3:5] == ("--load-format", "dummy") and dev.notes == ()
    kept = serve_command(_vllm(flags={"load-format": "safetensors"}))
    assert "safetensors" in kept.argv and kept.notes == ()


def test_bundled_model_name_becomes_the_users_path_or_a_placeholder():
    """Issue 9: `qwen3.6-27b` is a planner config, not a Hugging Face id."""
    cfg = _vllm(model="qwen3.6-27b")
    placeholder = serve_command(cfg)
    assert placeholder.argv[2] == "/path/to/qwen3.6-27b"
    assert placeholder.argv[3:5] == ("--served-model-name", "qwen3.6-27b")  # clients keep the name they used
    assert any("qwen3.6-27b is a planner config" in n and "/path/to/qwen3.6-27b" in n for n in placeholder.notes)
    given = serve_command(cfg, model_path="/ckpt/Qwen3.6-27B")
    assert given.argv[2] == "/ckpt/Qwen3.6-27B" and not any("planner config" in n for n in given.notes)
    docker = docker_command(cfg)
    assert "/path/to/qwen3.6-27b:/models/qwen3.6-27b:ro" in docker.argv
    assert any("planner config" in n for n in docker.notes)
    mounted = docker_command(cfg, host_model_dir="/ckpt/Qwen3.6-27B")
    assert "/ckpt/Qwen3.6-27B:/models/Qwen3.6-27B:ro" in mounted.argv
    assert not any("planner config" in n for n in mounted.notes)


def test_bundled_config_folder_counts_as_bundled():
    from servetune.model.bundled import bundled_model

    folder = bundled_model("qwen3-32b")
    assert folder is not None
    assert serve_command(_vllm(model=str(folder))).argv[2] == "/path/to/qwen3-32b"


def test_secrets_are_references_never_values():
    """Issue 16: API keys and secret-looking env values are written as "$VAR", never in clear."""
    cfg = _vllm(
        flags={"api-key": CANARY, "hf-token": CANARY, "max-num-batched-tokens": 8192},
        env={"HF_TOKEN": CANARY, "MY_PASSWORD": CANARY, "TOKENIZERS_PARALLELISM": "false", "CUSTOM": CANARY},
    )
    for cmd in (
        serve_command(cfg, secrets=("CUSTOM",)),
        docker_command(cfg, secrets=("CUSTOM",)),
    ):
        assert CANARY not in cmd.text and CANARY not in " ".join(cmd.argv) and CANARY not in " ".join(cmd.notes)
        assert '--api-key "$VLLM_API_KEY"' in cmd.text and '--hf-token "$HF_TOKEN"' in cmd.text
        assert "$MY_PASSWORD" in cmd.text and "$CUSTOM" in cmd.text
        assert "TOKENIZERS_PARALLELISM=false" in cmd.text  # a tokenizer setting, not a token
        assert "8192" in cmd.argv  # max-num-batched-tokens is a count
        assert any("VLLM_API_KEY" in n for n in cmd.notes)
    serve = serve_command(cfg, secrets=("CUSTOM",))
    assert serve.text.startswith('HF_TOKEN="$HF_TOKEN" MY_PASSWORD="$MY_PASSWORD" TOKENIZERS_PARALLELISM=false')
    assert '-e HF_TOKEN="$HF_TOKEN"' in docker_command(cfg).text


def test_secret_names():
    assert is_secret_name("HF_TOKEN") and is_secret_name("OPENAI_API_KEY") and is_secret_name("db_password")
    assert not is_secret_name("TOKENIZERS_PARALLELISM") and not is_secret_name("VLLM_USE_V1")
    assert is_secret_name("MY_VAR", ("my_var",))


def test_env_values_are_quoted_as_assignments():
    cmd = serve_command(_vllm(env={"VLLM_LOGGING_LEVEL": "DEBUG", "EXTRA": "a b"}))
    assert cmd.text.startswith("VLLM_LOGGING_LEVEL=DEBUG EXTRA='a b' vllm serve")
    words = _words(docker_command(_vllm(env={"EXTRA": "a b"})))
    assert words[words.index("-e") : words.index("-e") + 2] == ["-e", "EXTRA=a b"]


def test_sim_config_becomes_the_vllm_command_it_simulates():
    cfg = EngineConfig(
        engine="sim",
        model="/data/q",
        flags={"gpu": "H200", "time-scale": 10, "vllm-version": "0.24.0", "seed": 3, "max-num-seqs": 64},
    )
    cmd = serve_command(cfg)
    assert cmd.argv == ("vllm", "serve", "/data/q", "--max-num-seqs", "64")
    assert any("--gpu" in n and "--time-scale" in n and "vLLM 0.24.0" in n for n in cmd.notes)
    assert "vllm/vllm-openai:v0.24.0" in docker_command(cfg).argv


def test_llamacpp_serve_command():
    cfg = EngineConfig(
        engine="llamacpp",
        model="/m/tiny.gguf",
        served_model_name="tiny",
        flags={"c": 4096, "np": 2, "cont-batching": False, "n-gpu-layers": "all", "api-key": CANARY},
    )
    cmd = serve_command(cfg)
    assert cmd.argv[:5] == ("llama-server", "-m", "/m/tiny.gguf", "--alias", "tiny")
    assert cmd.argv[5:] == (
        "--ctx-size", "4096", "--parallel", "2", "--no-cont-batching", "--gpu-layers", "all",
        "--api-key", "$LLAMA_API_KEY",
    )  # fmt: skip
    assert CANARY not in cmd.text


def test_sglang_serve_command():
    cfg = EngineConfig(
        engine="sglang",
        model="Qwen/Qwen3-8B",
        served_model_name="q",
        flags={"tensor-parallel-size": 2, "disable-radix-cache": True, "enable-torch-compile": False},
    )
    cmd = serve_command(cfg)
    assert cmd.argv == (
        "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--served-model-name", "q",
        "--tp-size", "2", "--disable-radix-cache",
    )  # fmt: skip
    assert cmd.text.splitlines()[0] == "python -m sglang.launch_server \\"


def test_unknown_flags_pass_through_and_known_ones_are_checked():
    assert "--future-flag" in serve_command(_vllm(flags={"future-flag": True})).argv
    with pytest.raises(ServetuneError, match="max-model-len"):
        serve_command(_vllm(flags={"max-model-len": "lots"}))
