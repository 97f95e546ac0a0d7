"""`servetune serve` keeps its secrets: an engine's `--api-key` (vLLM's is a list) is sent by every probe, so the
engine becomes ready, and a canary key appears in no file of the run folder (events.jsonl, the engine's own log,
nginx's config and logs, serve.json), nothing serve prints, and no answer of the control server. Control endpoints
that change state need the control token; the read-only ones reveal no secret."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine
CANARY = "sk-canary-7a41c9e2d5"
SECOND = "sk-canary-second-8b3f"
MODEL = "servetune-tiny"


def _files_with(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def _get(url: str, key: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _post(url: str, body: dict, key: str | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _check_keeps_secrets(s, keys: list[str]) -> None:
    """The engine demands the key and serves with it; control endpoints guard and hide; then a kill (its death's
    log excerpt goes to the event log) and the stop; no canary anywhere."""
    ready = s.wait_ready(timeout_s=900)
    completion = {"model": MODEL, "prompt": "Hello", "max_tokens": 2}
    assert _post(s.url + "/v1/completions", completion)[0] == 401  # the engine demands a key, through nginx
    for key in keys:  # any key of vLLM's list works
        status, body = _post(s.url + "/v1/completions", completion, key)
        assert status == 200 and json.loads(body)["choices"], body
    control = s.state["control_url"]
    token = (s.run_dir / "control.token").read_text().strip()
    said = []
    for path in ("/status", "/metrics", "/readyz", "/healthz"):
        status, body = _get(control + path)
        assert status == 200, (path, status, body)
        said.append(body)
    status_body = json.loads(said[0])
    assert status_body["roles"]["main"]["config"]["flags"]["api-key"] in ("<redacted>", ["<redacted>"] * len(keys))
    # POST /switch changes what is served: refused without the token, or with another one (a key is not it)
    green = {"config": {"engine": "llamacpp", "model": "tiny"}}
    for key in (None, "wrong-token", CANARY):
        status, body = _post(control + "/switch", green, key)
        assert status == 401 and "control token" in body, (key, status, body)
    assert _post(control + "/nothing", {}, token)[0] == 404
    assert not [e for e in s.events if e["event"] in ("probe_failed", "start_failed", "switch_started")]
    os.killpg(ready["pid"], signal.SIGKILL)
    died = s.wait_event(lambda e: e["event"] == "died", timeout_s=60)
    s.wait_ready(timeout_s=900, after=s.events.index(died))
    assert s.stop() == 0
    assert (s.run_dir / "logs").is_dir() and len(list((s.run_dir / "logs").iterdir())) == 2
    for key in keys:
        for body in said:
            assert key not in body
        assert not _files_with(s.run_dir, key), f"{key} written in the run folder"
        assert key not in (s.run_dir.parent / f"{s.run_dir.name}.out").read_text()  # what serve printed


def test_llamacpp_api_key_is_sent_by_the_probes_and_written_nowhere(serve) -> None:
    pytest.importorskip("xllamacpp")
    flags = ["--ctx-size", "4096", "--parallel", "2", "--threads", "1", "--api-key", CANARY]
    s = serve("--engine", "llamacpp", "--model", "tiny", "--liveness-period", "0.5", "--", *flags)
    _check_keeps_secrets(s, [CANARY])


def test_vllm_list_api_key_is_sent_by_the_probes_and_written_nowhere(serve) -> None:
    """vLLM's `--api-key` takes a list: each of its keys is a secret, and the probes send one of them."""
    pytest.importorskip("vllm")
    s = serve(
        "--engine", "vllm", "--model", "tiny", "--startup-timeout", "900", "--accept-long-tokens", "500",
        "--liveness-period", "5", "--liveness-deadline", "60",
        "--", "--max-model-len", "2048", "--max-num-seqs", "4", "--enforce-eager", "--api-key", CANARY, SECOND,
    )  # fmt: skip
    _check_keeps_secrets(s, [CANARY, SECOND])
