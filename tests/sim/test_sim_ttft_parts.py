"""The simulator reports the TTFT parts vLLM reports (its /metrics, vLLM's names and definitions), and
`estimate --compare` puts a bench folder beside its simulated twin."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from servetune.load.runner import run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.runs import BenchRun, RunSource, write_run
from servetune.sim.backend import SimBackend
from servetune.sim.compare import compare, twins
from servetune.sim.deployment import build_deployment
from servetune.sim.explain import explain_ttft
from servetune.sim.flags import parse_sim_args
from servetune.sim.server import SimServer
from servetune.sim.virtual import RunTrace
from servetune.suite.probes.load_curve import LoadCurve, run as load_curve
from servetune.suite.spec import ProbeContext

ROOT = Path(__file__).resolve().parents[2]
ARGV = [
    "qwen3-32b",
    "--max-model-len",
    "16384",
    "--gpu",
    "H200",
    "--vllm-version",
    "0.24.0",
    "--served-model-name",
    "m",
]


def _backend() -> SimBackend:
    return SimBackend(build_deployment(parse_sim_args(ARGV)))


def test_the_simulated_split_is_the_explained_one() -> None:
    """The simulator's /metrics split (queue, prefill, API server) is its trace's: vLLM's prefill interval
    (scheduled → first token) holds the explain's prefill and mixed steps, the waits between chunks and the
    hand-over, its API-server part the explain's API server and the wait for the engine's loop to take the request
    in (vLLM stamps QUEUED then); in process there is no HTTP."""
    backend = _backend()
    backend.trace = RunTrace()
    result = asyncio.run(backend.run(Workload.synthetic(2048, 32), LoadShape.closed(16, requests=64)))
    split, why = result.engine_time, explain_ttft(backend.trace, result.records)
    assert split is not None and split.queue and split.prefill and split.decode and split.ttft
    assert split.ttft.requests == split.prefill.requests == split.client_requests == 64
    assert split.queue.mean_ms == pytest.approx(why.queue_ms, rel=1e-6)
    assert split.prefill.mean_ms == pytest.approx(
        why.prefill_ms + why.mixed_ms + why.between_ms + why.first_token_ms, rel=1e-6
    )
    assert split.api_ms == pytest.approx(why.api_ms + why.loop_ms, rel=1e-4, abs=1e-6)
    assert why.loop_ms > 0  # 16 streams of 2,048-token prompts: requests arrive while a step runs
    assert split.http_ms == pytest.approx(0, abs=1e-6)
    assert split.tokens_per_iteration and split.running and split.running.samples == 0  # exact time average
    assert 1 < split.running.mean <= split.running.max == 16


def test_the_intervals_alone_read_as_the_rendered_metrics() -> None:
    """A fit by part reads the request intervals straight from the server's counts (no /metrics text): the
    same histograms, so the same split, as a scrape of the rendered text gives."""
    from servetune.metrics.record import RequestRecord
    from servetune.sim.calibration import MeasuredRun, replay_launch

    deployment = build_deployment(parse_sim_args(ARGV))
    asked = tuple(RequestRecord(index=i, prompt_tokens=3000, output_tokens=32) for i in range(48))
    runs = [MeasuredRun(f"c{c}", LoadShape.closed(c, requests=48), asked, deployment, launch="L") for c in (1, 16)]
    full, light = replay_launch(runs, account=True), replay_launch(runs, intervals_only=True)
    for run in runs:
        a, b = full[run.name].engine_time, light[run.name].engine_time
        assert a is not None and b is not None and b.ttft is not None and b.tokens_per_iteration is None
        for name in ("ttft", "queue", "prefill", "decode", "inference"):
            assert getattr(a, name) == getattr(b, name), name
        assert light[run.name].trace is None


def test_the_load_curve_keeps_each_levels_parts() -> None:
    ctx = ProbeContext(backend=_backend())
    result = asyncio.run(
        load_curve(ctx, LoadCurve(concurrency=[1, 8], requests_per_point=16, stop_at_saturation=False))
    )
    for point in result.points:
        parts = [point[f"ttft_{p}_ms"] for p in ("queue", "prefill", "api", "http")]
        assert sum(parts) == pytest.approx(point["ttft_p50_ms"], rel=0.5)  # a mean beside a median: same size
        assert point["ttft_prefill_ms"] > 0


async def test_sim_serve_is_read_through_http_like_vllm() -> None:
    """Through sim-serve's HTTP (`run_load` and its /metrics watch): the parts are there, and the HTTP part —
    the client's TTFT beyond the server's — is small and not negative."""
    server = SimServer(build_deployment(parse_sim_args([*ARGV, "--time-scale", "20"])))
    task = asyncio.create_task(server.run_engine())
    try:
        async with TestServer(server.app()) as http:
            url = str(http.make_url("")).rstrip("/")
            result = await run_load(url, "m", Workload.synthetic(512, 16), LoadShape.closed(4, requests=12), workers=1)
    finally:
        task.cancel()
    split = result.engine_time
    assert split is not None and split.prefill and split.queue and split.client_ttft_ms
    assert split.ttft and split.ttft.requests == split.client_requests == 12
    # the engine's histograms are in simulated time (x20), the client's TTFT in wall time: the HTTP part in wall
    # time is a few ms, plus how late this process's event loop ran (server and client share it here, and on a
    # loaded machine every stamp is late by as much; x20 would make that lateness look like a simulated cost)
    lateness = max(p.loop_lag_p99_ms for p in result.summary.validity.client.processes)  # type: ignore[union-attr]
    http_wall_ms = split.parts(client_scale=20)["http_ms"] / 20
    assert -1 <= http_wall_ms <= 10 + lateness, (http_wall_ms, lateness)


def _folder(tmp_path: Path) -> Path:
    """A bench folder whose two points were measured on the simulator itself (as `bench --save-result` keeps
    them): its twin must reproduce it."""
    backend = _backend()
    for i, level in enumerate((2, 16)):
        workload, shape = Workload.synthetic(1024, 32, seed=level), LoadShape.closed(level, requests=32)
        result = asyncio.run(backend.run(workload, shape))
        source = RunSource(
            tool="servetune", path="", label="sim", kind="concurrency", level=level, started_at=f"2026-12-03T10:0{i}"
        )
        settings = {"shape": shape.model_dump(mode="json"), "workload": workload.model_dump(mode="json")}
        run = BenchRun.of(source, {}, result.records, settings).model_copy(update={"engine_time": result.engine_time})
        write_run(tmp_path, f"c{level}", run)
    return tmp_path


def test_a_folder_measured_on_the_simulator_is_its_own_twin(tmp_path: Path) -> None:
    points = compare(twins(_folder(tmp_path), build_deployment(parse_sim_args(ARGV))), explain="")
    assert [p.level for p in points] == ["c2", "c16"]
    for p in points:
        assert set(p.errors) >= {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "output_tok_s", "api_ms", "prefill_ms"}
        assert all(abs(e) < 0.01 for k, e in p.errors.items() if k != "queue_ms"), p.errors
        assert p.explain is not None and p.simulated_time is not None


def test_estimate_compare_prints_both_sides(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "bench")
    cmd = [sys.executable, "-m", "servetune", "estimate", *ARGV, "--compare", str(folder)]
    env = {"PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([*cmd, "--explain", "--json", str(tmp_path / "c.json")], capture_output=True, text=True,
                         timeout=120, env=env, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "TTFT p50 ms" in out.stdout and "API server" in out.stdout and "simulated, finer" in out.stdout
    assert [p["level"] for p in json.loads((tmp_path / "c.json").read_text())] == ["c2", "c16"]
    bad = subprocess.run([*cmd, "--concurrency", "4"], capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 2 and "--concurrency" in bad.stderr and "drop the load options" in bad.stderr
    (tmp_path / "empty").mkdir()
    empty = subprocess.run([*cmd[:-1], str(tmp_path / "empty")], capture_output=True, text=True, timeout=120, env=env)
    assert empty.returncode == 2 and "no run of servetune bench" in empty.stderr


def test_the_api_servers_time_grows_with_the_prompt() -> None:
    """One request alone on the server: vLLM's API-server part grows with the prompt (tokenization; ~7 ms at
    1,024 tokens, ~65 ms at 16,384 on an H200), and the simulated one by `request_token_s` a token."""
    backend = _backend()
    coef = backend.deployment.timing.coef
    parts = {}
    for tokens in (1024, 15000):  # the model's length is 16,384
        result = asyncio.run(backend.run(Workload.synthetic(tokens, 8, seed=tokens), LoadShape.closed(1, requests=3)))
        assert result.engine_time is not None and result.engine_time.api_ms is not None
        parts[tokens] = result.engine_time.api_ms
    assert coef.request_token_s > 0
    assert parts[15000] - parts[1024] == pytest.approx(13976 * coef.request_token_s * 1e3, rel=0.05)


def test_a_request_is_queued_when_the_engines_loop_takes_it_in() -> None:
    """vLLM stamps QUEUED when its engine-core loop takes a request in, between steps: at a light load with room
    in every step, its queue part is 0 and the rest of the step it arrived during is in the API server's part —
    the simulator's /metrics say the same."""
    result = asyncio.run(_backend().run(Workload.synthetic(2048, 64), LoadShape.open(1, requests=24)))
    split = result.engine_time
    assert split is not None and split.queue is not None and split.api_ms is not None
    assert split.queue.mean_ms == pytest.approx(0, abs=1e-6)
    assert split.api_ms > 1e3 * _backend().deployment.timing.api_time(2048)  # it waited for a step to end


def test_a_profile_fitted_before_the_per_token_term_keeps_its_predictions(tmp_path: Path) -> None:
    """A profile written before `request_token_s` existed loads with it at 0 (its `request_overhead_s` holds its
    prompts' share), not at the planning default; a new profile keeps its own value."""
    from servetune.sim.profile import CalibrationProfile
    from servetune.sim.steptime import REQUEST_TOKEN_S, StepCoefficients

    old = tmp_path / "old.json"
    old.write_text(json.dumps({"gpu": "H200", "model": "m", "coefficients": {"request_overhead_s": 0.011}}))
    assert CalibrationProfile.load(old).coefficients.request_token_s == 0
    new = tmp_path / "new.json"
    CalibrationProfile(gpu="H200", model="m", coefficients=StepCoefficients()).save(new)
    assert CalibrationProfile.load(new).coefficients.request_token_s == REQUEST_TOKEN_S
