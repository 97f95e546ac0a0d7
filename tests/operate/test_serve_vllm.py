"""One real vLLM (CPU build) under `servetune serve`: ready through nginx, kill -9 classified and restarted.
Slow: two vLLM starts (~1-2 min each on 2 cores)."""

from __future__ import annotations

import json
import os
import signal
import urllib.request

import pytest

pytestmark = pytest.mark.engine


def test_vllm_served_killed_and_restarted(serve) -> None:
    pytest.importorskip("vllm")
    s = serve(
        "--engine",
        "vllm",
        "--model",
        "tiny",
        "--startup-timeout",
        "600",
        "--accept-long-tokens",
        "1000",
        "--liveness-period",
        "5",
        "--liveness-deadline",
        "30",
        "--",
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "8",
        "--enforce-eager",
    )
    ready = s.wait_ready(timeout_s=900)
    assert ready["facts"]["max_model_len"] == 4096 and ready["capacity"]["kv_cache_tokens"] > 0
    os.killpg(ready["pid"], signal.SIGKILL)
    died = s.wait_event(lambda e: e["event"] == "died", timeout_s=30)
    assert died["cause"] == "killed_by_SIGKILL" and died["excerpt"]
    again = s.wait_ready(timeout_s=900, after=s.events.index(died))
    body = json.dumps({"model": "servetune-tiny", "prompt": "Hello", "max_tokens": 4}).encode()
    req = urllib.request.Request(s.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    assert json.load(urllib.request.urlopen(req, timeout=60))["choices"]
    metrics = urllib.request.urlopen(s.url + "/metrics", timeout=30).read().decode()
    assert "vllm:num_requests_running" in metrics  # the engine's series, through the proxy
    assert again["pid"] != ready["pid"]
