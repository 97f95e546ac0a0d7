"""Real llama.cpp server (xllamacpp) with the tiny model: readiness, facts, check, teardown, failure classes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from servetune.engines.config import EngineConfig
from servetune.engines.failures import EngineLaunchError
from servetune.engines.launch import attach, launch
from servetune.process.proctable import group_members, living
from servetune.suite.check import check_server, passed

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _needs_xllamacpp() -> None:
    pytest.importorskip("xllamacpp")


def _cfg(tiny_model, **flags) -> EngineConfig:
    return EngineConfig(
        engine="llamacpp",
        model=str(tiny_model.gguf_path),
        served_model_name="servetune-tiny",
        flags={"ctx-size": 4096, "parallel": 2, **flags},
    )


STARTUP_GUARD_S = 60.0
"""The startup timeout of the launches that must fail on their own: a hang guard. Their class does not depend on
when the log is read: once the engine has exited, launch waits for its process group to be gone before reading
the whole log, and at the deadline it stops the group first (`tests/engines/test_launch_log.py`). These engines
exit within 0.7-1.6 s on the 2-core machine at a load of 9."""


def _launch_error(cfg: EngineConfig, tmp_path: Path, **kw) -> EngineLaunchError:
    with pytest.raises(EngineLaunchError) as info:
        launch(cfg, log_dir=tmp_path, startup_timeout_s=kw.pop("timeout", STARTUP_GUARD_S), **kw)
    err = info.value
    print(f"\n[{err.failure.klass}] excerpt:\n{err.failure.excerpt}\nhint: {err.failure.hint}")
    # a failed launch leaves nothing behind; None: it failed before any process started (a missing model file)
    assert err.teardown is None or err.teardown.clean
    return err


def test_fixture_server_is_ready_with_facts(llama_server) -> None:
    facts = llama_server.facts
    assert (facts.n_slots, facts.n_ctx_per_slot, facts.n_ctx) == (4, 2048, 8192)
    assert (facts.n_batch, facts.n_ubatch) == (2048, 512)
    assert facts.version and facts.version.startswith("xllamacpp-")
    assert llama_server.alive() and llama_server.classify_death() is None


def test_check_passes(llama_server) -> None:
    report = asyncio.run(check_server(llama_server.base_url, llama_server.model_name, long_context_tokens=1800))
    assert passed(report), report.notes
    assert report.figures["max_model_len"] == 2048
    assert report.notes[-1].startswith("PASS long context") and "prompt tokens" in report.notes[-1]


def test_output_is_valid_text_without_specials(llama_server) -> None:
    """The banned lone-byte and special tokens never come out, even with sampling at temperature 1.5."""
    body = {
        "model": llama_server.model_name,
        "prompt": "The train leaves",
        "max_tokens": 200,
        "temperature": 1.5,
        "seed": 7,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        llama_server.base_url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    answer = json.loads(urllib.request.urlopen(req, timeout=120).read())
    text = answer["choices"][0]["text"]
    assert answer["usage"]["completion_tokens"] == 200
    assert "\ufffd" not in text and "<|im_" not in text and "<|endoftext|>" not in text


def test_attach_to_running_server(llama_server) -> None:
    attached = attach(llama_server.base_url + "/v1", llama_server.model_name)
    assert attached.facts.max_model_len == 2048 and attached.cfg.engine == "llamacpp"
    assert attached.alive() and attached.stop() is None  # never stops what it did not start


def test_launch_stop_proves_no_process_left(tiny_model, tmp_path: Path) -> None:
    progress: list[str] = []
    engine = launch(_cfg(tiny_model), log_dir=tmp_path, startup_timeout_s=60, on_progress=progress.append)
    pgid = engine.group.pgid
    assert any("listening on" in p or "ready on" in p for p in progress)
    assert engine.log_path.parent == tmp_path and engine.log_path.read_text().startswith("# servetune launch:")
    report = engine.stop(grace_s=5)
    assert report.clean and report.sent_sigterm and not report.sent_sigkill and report.seconds < 5
    assert not living(group_members(pgid))


def test_port_in_use(tiny_model, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        err = _launch_error(_cfg(tiny_model), tmp_path, port=sock.getsockname()[1])
    assert err.failure.klass == "port_in_use" and "bind" in err.failure.excerpt


def test_model_missing(tmp_path: Path) -> None:
    cfg = EngineConfig(engine="llamacpp", model=str(tmp_path / "nope.gguf"))
    err = _launch_error(cfg, tmp_path)
    assert err.failure.klass == "model_missing" and "nope.gguf" in err.failure.excerpt
    assert err.teardown is None and not list(tmp_path.iterdir())  # caught before a log or a process existed


def test_unsupported_architecture(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "foo.gguf"
    w = gguf.GGUFWriter(str(path), "foo")
    w.add_tensor("x", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    err = _launch_error(EngineConfig(engine="llamacpp", model=str(path)), tmp_path)
    assert err.failure.klass == "unsupported_model" and "unknown model architecture" in err.failure.excerpt


def test_exited_early_on_a_truncated_model(tiny_model, tmp_path: Path) -> None:
    path = tmp_path / "half.gguf"
    data = tiny_model.gguf_path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    err = _launch_error(EngineConfig(engine="llamacpp", model=str(path)), tmp_path)
    assert err.failure.klass == "exited_early" and err.failure.exit_code == 1
    assert "corrupted or incomplete" in err.failure.excerpt


def test_invalid_flag(tiny_model, tmp_path: Path) -> None:
    err = _launch_error(_cfg(tiny_model, **{"no-such-flag": 3}), tmp_path)
    assert err.failure.klass == "invalid_flag" and "no-such-flag" in err.failure.excerpt


def test_startup_timeout(tiny_model, tmp_path: Path) -> None:
    err = _launch_error(_cfg(tiny_model), tmp_path, timeout=0.0)
    assert err.failure.klass == "startup_timeout" and "Not ready after 0 s" in err.failure.hint


def test_died_under_load(tiny_model, tmp_path: Path) -> None:
    engine = launch(_cfg(tiny_model), log_dir=tmp_path, startup_timeout_s=60)
    errors: list[str] = []

    def load() -> None:
        body = {"model": engine.model_name, "prompt": "hello", "max_tokens": 1500, "ignore_eos": True}
        req = urllib.request.Request(
            engine.base_url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            urllib.request.urlopen(req, timeout=60).read()
        except Exception as exc:  # noqa: BLE001 - the request must fail; which error depends on timing
            errors.append(type(exc).__name__)

    worker = threading.Thread(target=load)
    worker.start()
    threading.Event().wait(0.3)
    os.kill(engine.pid, signal.SIGKILL)
    worker.join(timeout=60)
    assert errors, "the request should fail when the engine dies"
    deadline = time.monotonic() + 10
    while engine.alive() and time.monotonic() < deadline:  # the socket closes a moment before the exit status
        time.sleep(0.01)
    assert not engine.alive()
    death = engine.classify_death()
    print(f"\n[{death.klass}] exit={death.exit_code}\n{death.excerpt}\nhint: {death.hint}")
    assert death.klass == "died_under_load" and death.exit_code == -signal.SIGKILL
    assert "signal 9" in death.hint and death.excerpt
    assert engine.stop().clean


def test_engine_command_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SERVETUNE_LLAMA_SERVER", str(tmp_path / "no-llama-server"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    with pytest.raises(EngineLaunchError) as info:
        launch(EngineConfig(engine="llamacpp", model=str(model)), log_dir=tmp_path, startup_timeout_s=30)
    assert info.value.failure.klass == "exited_early" and "no-llama-server" in info.value.failure.excerpt
