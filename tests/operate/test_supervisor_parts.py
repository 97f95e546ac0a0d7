"""The supervisor's own parts, in this process and without an engine: its control server (real HTTP) and its
nginx (the real binary), each noticed when it ends and started again."""

from __future__ import annotations

import json
import shutil
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.operate.events import read_events
from servetune.operate.serve_options import ServeOptions
from servetune.operate.supervisor import Supervisor


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    """A supervisor whose parts run (nginx, control server) and whose roles are never started."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.skip("nginx not installed (scripts/setup.sh installs it)")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    cfg = EngineConfig(engine="llamacpp", model=str(tmp_path / "never-started.gguf"))
    sup = Supervisor(cfg, ServeOptions(run_dir=tmp_path / "run", backoff_base_s=0.1))
    try:
        sup._setup()
        yield sup
    finally:
        sup._shutdown()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def test_a_control_server_whose_thread_ended_is_started_again_on_its_port(supervisor: Supervisor) -> None:
    control = supervisor.control
    assert control is not None
    url = control.url
    control.httpd.shutdown()  # its serve_forever returns: the thread ends, as after an error inside it
    assert not control.alive()
    supervisor._watch_control()
    assert supervisor.control is not control and supervisor.control is not None and supervisor.control.url == url
    assert json.load(urllib.request.urlopen(url + "/healthz", timeout=5)) == {"ok": True}
    events = read_events(supervisor.run_dir / "events.jsonl")
    assert next(e for e in events if e["event"] == "control_restarted")["url"] == url
    assert json.loads((supervisor.run_dir / "serve.json").read_text())["control_url"] == url
