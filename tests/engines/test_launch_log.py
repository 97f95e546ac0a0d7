"""A failed launch is classified from the engine's whole log, never from one still being written: once the engine's
leader exited, the rest of its process group is given time to say its last words and stopped; at the deadline the
group is stopped first, then the log read. (`test_llamacpp_live.py::test_unsupported_architecture` took its class
from whatever the log held at the moment it was read.)

The engine here is a shell script standing in for `llama-server` (SERVETUNE_LLAMA_SERVER): only a script can write
its cause a fixed time after its leader exits, or only when it is stopped, which is the interleaving under test; a
real engine does either only as a busy machine happens to schedule it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.failures import EngineLaunchError
from servetune.engines.launch import launch

ARCHITECTURE = "llama_model_load: error loading model: unknown model architecture: 'foo'"


def _engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> EngineConfig:
    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\n" + script)
    server.chmod(server.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SERVETUNE_LLAMA_SERVER", str(server))
    model = tmp_path / "foo.gguf"
    model.write_bytes(b"GGUF")
    return EngineConfig(engine="llamacpp", model=str(model))


def _failure(cfg: EngineConfig, tmp_path: Path, timeout_s: float) -> EngineLaunchError:
    with pytest.raises(EngineLaunchError) as info:
        launch(cfg, log_dir=tmp_path / "logs", startup_timeout_s=timeout_s)
    err = info.value
    assert err.teardown is not None and err.teardown.clean  # nothing of the group is left
    return err


def test_the_cause_a_process_of_the_group_writes_after_the_leader_exited_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader exits at once; a process of its group (as vLLM's engine core, or a launcher's child) writes the
    cause a second later. Read at the leader's exit, the log held no cause: `exited_early`."""
    cfg = _engine(tmp_path, monkeypatch, f'(sleep 1; echo "{ARCHITECTURE}") &\nexit 1\n')
    err = _failure(cfg, tmp_path, timeout_s=60)
    assert err.failure.klass == "unsupported_model" and "unknown model architecture" in err.failure.excerpt
    assert err.failure.exit_code == 1


def test_what_an_engine_writes_as_it_is_stopped_at_the_deadline_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the deadline the engine is stopped, and what it writes as it stops (where it was stuck) is part of the
    log the class is read from: read before the stop, it was a plain `startup_timeout`."""
    script = (
        "trap 'echo \"llama_init_from_model: failed to allocate buffer for kv cache\"; exit 1' TERM\n"
        "echo 'loading model'\n"
        "while :; do sleep 0.1; done\n"
    )
    err = _failure(_engine(tmp_path, monkeypatch, script), tmp_path, timeout_s=1.0)
    assert err.failure.klass == "kv_too_small" and "kv cache" in err.failure.excerpt


def test_an_engine_stopped_at_the_deadline_with_nothing_said_is_a_startup_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _engine(tmp_path, monkeypatch, "echo 'loading model'\nwhile :; do sleep 0.1; done\n")
    err = _failure(cfg, tmp_path, timeout_s=1.0)
    assert err.failure.klass == "startup_timeout" and "Not ready after 1 s" in err.failure.hint
    assert err.teardown is not None and err.teardown.sent_sigterm
