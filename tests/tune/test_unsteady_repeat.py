"""`tune` runs a probe once more when its load was no steady-state measurement (a server stall, a window that never
settled), keeps the second result with the first one's reasons, and never runs it a third time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

from servetune.engines.facts import EngineFacts
from servetune.mock.config import MockConfig
from servetune.mock.server import serve_forever
from servetune.suite.result import ProbeResult
from servetune.tune.loop import run_experiment
from servetune.tune.schema.loader import parse_experiment
from servetune.tune.search.sources import Verdict

EXPERIMENT = """
name: unsteady
engine: {engine: vllm, model: /models/mock}
suite:
  repeats: 1
  warmup_requests: 0
  probes:
    load_curve: {concurrency: [4], requests_per_point: 40, input_tokens: 16, output_tokens: 32}
objective: output_throughput
variants:
  matrix:
    baseline: base
    changes: {fewer-seqs: {max-num-seqs: 8}}
"""


class _MockEngine:
    """A launched "engine" that is the mock server (its metrics carry vLLM's names)."""

    def __init__(self, url: str) -> None:
        self.base_url, self.model_name, self.facts, self.pid = url, "mock", EngineFacts(engine="vllm"), os.getpid()

    def __enter__(self) -> _MockEngine:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def alive(self) -> bool:
        return True


@contextlib.contextmanager
def _mock(config: MockConfig) -> Iterator[str]:
    """The mock server on a loop of its own thread (the session runs its coroutines on loops of its own)."""
    loop = asyncio.new_event_loop()
    port: list[int] = []
    ready = threading.Event()
    task: list[asyncio.Task] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        task.append(loop.create_task(serve_forever(config, "127.0.0.1", 0, lambda p: (port.append(p), ready.set()))))
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task[0])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(task[0].cancel)
        thread.join(10)
        loop.close()


def _load_curve_run(tmp_path: Path, config: MockConfig) -> ProbeResult:
    with _mock(config) as url:
        outcome = run_experiment(
            parse_experiment(EXPERIMENT),
            tmp_path,
            emit=lambda _: None,
            launcher=lambda *_: _MockEngine(url),  # type: ignore[arg-type, return-value]
            feasibility=lambda _: Verdict(),
            reorder=False,
        )
    record = next(r for r in outcome.records if r.variant.name == "base")  # the first to run (the mock's pause)
    assert record.status == "done", record.failure
    [run] = record.runs
    return run.result


def test_a_probe_whose_run_stalled_runs_once_more_and_says_why(tmp_path: Path) -> None:
    """Every stream of the mock stops for 1.5 s once, 0.8 s into the load curve: the first run is flagged, the
    second (the pause is over) is clean and is the one stored, with the first one's reason."""
    result = _load_curve_run(tmp_path, MockConfig(ttft_ms=30, itl_ms=5, pause_at_s=0.8, pause_s=1.5))
    assert len(result.repeated_because) == 1 and result.repeated_because[0].startswith("the server stalled 1.5")
    assert result.ok and result.unsteady == [] and not any("stalled" in w for w in result.warnings), result.warnings


def test_a_steady_probe_runs_once(tmp_path: Path) -> None:
    result = _load_curve_run(tmp_path, MockConfig(ttft_ms=30, itl_ms=5))
    assert result.unsteady == [] and result.repeated_because == []


def test_a_probe_that_stays_unsteady_is_repeated_once_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run of the probe is unsteady: two runs per variant, the second stored with its own reasons and the
    first's."""
    from servetune.tune.execution import session

    calls: list[int] = []

    async def unsteady(spec: object, ctx: object, params: object) -> ProbeResult:
        calls.append(1)
        return ProbeResult(probe="load_curve", figures={"goodput_rps": 1.0}, unsteady=[f"run {len(calls)}"])

    monkeypatch.setattr(session, "run_probe", unsteady)
    result = _load_curve_run(tmp_path, MockConfig())
    assert len(calls) == 4 and result.unsteady == ["run 2"] and result.repeated_because == ["run 1"]
