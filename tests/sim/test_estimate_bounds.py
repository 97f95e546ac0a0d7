"""`estimate` prices a run before it simulates it: the records it would keep and the time it would take, from its
load options and the simulated deployment's fastest request. `--requests 999999999999` grew the process by
65 MB/s until the kernel killed it (the README's test command was killed so, at 21 GiB in the fuzz suite)."""

from __future__ import annotations

import time

import pytest

from servetune.cli import main
from servetune.engines.config import EngineConfig
from servetune.sim.deployment import deployment_for_config


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--concurrency", "2", "--requests", "999999999999"], "would keep ~999,999,999,999 request records"),
        (["--concurrency", "2", "--warmup-requests", "999999999999"], "--warmup-requests 999999999999 would keep"),
        (["--concurrency", "2", "--turns", "999999999999"], "--turns: input should be less than or equal to 1000"),
        (["--concurrency", "2", "--duration", "999999999999"], "--duration: input should be less than or equal"),
        (["--concurrency", "2", "--duration", "604800"], "of work here; the limit is 10 min"),
        (["--rate", "1000", "--duration", "604800"], "would keep ~604,800,000 request records"),
    ],
)
def test_a_run_too_large_is_refused_before_it_starts(
    words: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as done:
        main(["estimate", "qwen3.6-27b", *words])
    err = capsys.readouterr().err
    assert done.value.code == 2 and says in err and "fix: " in err, err
    assert "would keep" not in says or "fix: lower --" in err
    assert time.monotonic() - t0 < 20


def test_the_request_floor_is_below_what_the_simulator_takes() -> None:
    """The floor counts a closed loop's requests from below the truth: a one-token request is at least the API
    server's time, and each further token at least one decode step."""
    dep = deployment_for_config(EngineConfig(engine="vllm", model="qwen3.6-27b"))
    one, many = dep.request_floor_s(1), dep.request_floor_s(128)
    assert 0 < one < many
    assert many > 128 * (many - one) / 127 * 0.99  # linear in the tokens
