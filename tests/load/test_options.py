"""`LoadOptions`: bench's and estimate's load options in one model — the same flags give the same Workload and
LoadShape in both, and every bad value is an error naming its flag before any work starts."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servetune.cli.model_options import parse_words
from servetune.errors import ServetuneError
from servetune.load.bench_args import BenchArgs
from servetune.load.options import LoadOptions
from servetune.sim.args import EstimateArgs

ROOT = Path(__file__).resolve().parents[2]


def test_bench_and_estimate_take_every_load_option() -> None:
    assert set(LoadOptions.model_fields) <= set(BenchArgs.model_fields) & set(EstimateArgs.model_fields)


def test_workload_and_shape() -> None:
    o = LoadOptions.parse(input_tokens=1000, output_tokens=200, range_ratio=0.25, concurrency=8, seed=3)
    (klass,) = o.workload().classes
    assert (klass.input_dist.kind, klass.input_dist.mean) == ("uniform", 1000)
    assert klass.input_dist.std == pytest.approx(250 / math.sqrt(3))  # uniform in [750, 1250]
    assert o.shape().kind == "concurrency" and o.shape().concurrency == 8 and o.shape().requests == 100
    assert LoadOptions.parse(concurrency=2, warmup_s=1, duration=3, ramp_s=0.5).shape().stream_starts() == [0, 0.25]
    opened = LoadOptions.parse(rate=3, max_concurrency=4, duration=5, warmup_s=1, arrival="gamma", burstiness=0.5)
    shape = opened.shape()
    assert (shape.rate, shape.max_concurrency, shape.requests, shape.duration_s) == (3, 4, None, 5)
    assert LoadOptions.parse(rate="inf", requests=9).shape().rate == math.inf
    mix = LoadOptions.parse(mix="a:0.7:100:10,b:0.3:2000:50", concurrency=2).workload()
    assert [c.name for c in mix.classes] == ["a", "b"]
    assert LoadOptions.parse(concurrency=1, goodput="ttft:500").slos() is not None
    assert LoadOptions.parse(concurrency=1, percentiles="50,99.9").percentile_values() == (50, 99.9)


def test_estimate_reads_its_old_spellings_and_leaves_vllms_flags() -> None:
    o = parse_words(
        EstimateArgs, ["qwen", "--num-requests", "7", "--input-len", "64", "-tp", "2", "--concurrency", "3"]
    )
    assert (o.requests, o.input_tokens, o.concurrency) == (7, 64, 3) and o.engine_flags == ("qwen", "-tp", "2")


@pytest.mark.parametrize(
    ("values", "flag"),
    [
        ({"concurrency": 0}, "--concurrency"),
        ({"concurrency": 10**9}, "--concurrency"),
        ({"rate": "nan"}, "--rate"),
        ({"rate": -1}, "--rate"),
        ({"concurrency": 1, "output_std": -3}, "--output-std"),
        ({"concurrency": 1, "prefix_groups": 0}, "--prefix-groups"),
        ({"concurrency": 1, "requests": 0}, "--requests"),
        ({"concurrency": 1, "duration": "inf"}, "--duration"),
        ({"concurrency": 1, "seed": -1}, "--seed"),
        ({"concurrency": 1, "range_ratio": 1.5}, "--range-ratio"),
        ({"concurrency": 1, "first_token_timeout": 0}, "--first-token-timeout"),
        ({"concurrency": 1, "arrival": "bursty"}, "--arrival"),
        ({"concurrency": 1, "prefix_tokens": 300}, "--prefix-tokens"),
        ({"concurrency": 1, "mix": "a:x:1:2"}, "--mix"),
        ({"concurrency": 1, "mix": "a:-1:1:2"}, "--mix"),
        ({"concurrency": 1, "percentiles": "50,120"}, "--percentiles"),
        ({"concurrency": 1, "dataset": "/no/such/file.jsonl"}, "--dataset"),
        ({"concurrency": 1, "output_std": 5, "range_ratio": 0.1}, "--range-ratio"),
        ({"concurrency": 1, "max_concurrency": 4}, "--max-concurrency"),
        ({"rate": 5, "requests": 9, "ramp_s": 2}, "--ramp-s"),
        ({"concurrency": 1, "ramp_s": -1}, "--ramp-s"),
        ({"duration": 5}, "needs a load"),
        ({"concurrency": 1, "rate": 2}, "--concurrency"),
        ({"rate": "inf", "duration": 5}, "rate inf"),
    ],
)
def test_bad_values_name_their_flag(values: dict, flag: str) -> None:
    with pytest.raises(ServetuneError) as err:
        LoadOptions.parse(**values)
    assert flag in str(err.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "servetune", *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--concurrency", "0"],
        ["--rate", "nan"],
        ["--output-std", "-3", "--concurrency", "1"],
        ["--extra-body", "[1,2]", "--concurrency", "1"],
        ["--sweep", "0,-1", "--concurrency", "1"],
    ],
)
def test_bench_rejects_bad_values_before_connecting(args: list[str]) -> None:
    proc = _cli("bench", "--url", "http://127.0.0.1:1", "--model", "m", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "error:" in proc.stderr


def test_estimate_takes_benchs_options_and_its_old_spellings() -> None:
    common = ["qwen3.6-27b", "--max-model-len", "8192", "--language-model-only", "--gpu", "H200"]
    new = _cli("estimate", *common, "--requests", "6", "--input-tokens", "300", "--concurrency", "2", "--json")
    old = _cli("estimate", *common, "--num-requests", "6", "--input-len", "300", "--concurrency", "2", "--json")
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert {**json.loads(new.stdout), "started_at": ""} == {**json.loads(old.stdout), "started_at": ""}
    assert "== qwen3.6-27b on simulated vLLM" in new.stderr and "ttft" in new.stderr
    for bad, says in (
        (["--tp", "3", "--concurrency", "1"], "not divisible by tensor-parallel-size 3"),
        (["--max-num-seq", "4", "--concurrency", "1"], "did you mean --max-num-seqs"),
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "1", "--input-tokens", "9000"], "maximum context length is 8192"),
    ):
        proc = _cli("estimate", *common, *bad)
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    two = _cli("estimate", "qwen3.6-27b", "--max-model-len", "128K", "--language-model-only", "--gpu",
               "A100-80G-SXMx2", "--concurrency", "1", "--requests", "1")  # fmt: skip
    assert two.returncode == 0 and "on 2x A100-80G-SXM" in two.stdout, two.stderr


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (
            {"concurrency": 2, "requests": 999_999_999_999},
            "--requests 999999999999 would keep ~999,999,999,999 request",
        ),
        ({"concurrency": 2, "warmup_requests": 999_999_999_999}, "--warmup-requests 999999999999 would keep"),
        ({"concurrency": 2, "requests": 100_000, "turns": 1000}, "--requests 100000 x --turns 1000 would keep"),
        ({"rate": 1000, "duration": 600_000}, "--duration 600000.0 x --rate 1000.0 would keep"),
        ({"concurrency": 2, "turns": 999_999_999_999}, "--turns"),
        ({"concurrency": 2, "duration": 1e9}, "--duration"),
        ({"concurrency": 2, "input_tokens": 10**12}, "--input-tokens"),
        ({"concurrency": 2, "output_tokens": 10**12}, "--output-tokens"),
        ({"rate": 1e9, "requests": 5}, "--rate"),
        ({"concurrency": 2, "seed": 2**64}, "--seed"),
        ({"concurrency": 2, "first_token_timeout": 1e12}, "--first-token-timeout"),
    ],
)
def test_a_run_too_large_to_hold_is_refused_before_it_starts(values: dict, says: str) -> None:
    """Every number has a bound, and the records a run would keep are counted before it starts: 999999999999
    requests used to grow the process by 65 MB/s until the kernel killed it."""
    with pytest.raises(ServetuneError) as err:
        LoadOptions.parse(**values)
    assert says in str(err.value)
    if "would keep" in says:
        assert "the limit is 4 GiB" in err.value.problem and err.value.fix and err.value.fix.startswith("lower --")


def test_footprint_counts_every_phase_and_a_sweep() -> None:
    o = LoadOptions.parse(concurrency=4, requests=100, warmup_requests=10, turns=3)
    assert o.footprint().requests == (100 + 10) * 3
    timed = LoadOptions.parse(rate=2, duration=50, warmup_s=5, cooldown_s=5)
    assert timed.footprint().requests == pytest.approx(2 * 60)
    closed = LoadOptions.parse(concurrency=4, duration=10)
    assert closed.footprint().requests == 0  # a live server's speed is not known before the run: not counted
    assert closed.footprint(lambda tokens: 0.5).requests == pytest.approx(4 * 10 / 0.5)
    assert o.footprint(levels=(1, 2, 4)).requests == 3 * o.footprint().requests
    with pytest.raises(ServetuneError, match="of work here; the limit is 10 min"):
        LoadOptions.parse(concurrency=2, requests=650_000).check_footprint(requests_per_s=1000, limit_s=600)


def test_a_bare_sweep_is_of_concurrencies_as_help_says() -> None:
    """`--sweep 1,4,16,64` without --concurrency or --rate swept rates while --help said concurrencies."""
    assert "Concurrencies (or rates, with --rate)" in BenchArgs.model_fields["sweep"].description  # type: ignore[operator]
    args = parse_words(BenchArgs, ["--model", "m", "--sweep", "1,4,16,64"])
    assert args.load().shape().kind == "concurrency" and args.sweep == (1, 4, 16, 64)
    args = parse_words(BenchArgs, ["--model", "m", "--rate", "1", "--sweep", "0.5", "--sweep", "2"])
    assert args.load().shape().kind == "rate" and args.load().at_level(2).shape().rate == 2
    for bad, says in (("1.5", "whole numbers"), ("inf", "whole numbers"), ("1,999999999", "--concurrency")):
        with pytest.raises(ServetuneError, match=says):
            parse_words(BenchArgs, ["--model", "m", "--sweep", bad])
    with pytest.raises(ServetuneError, match="x 3 sweep levels would keep"):
        parse_words(BenchArgs, ["--model", "m", "--requests", "300000", "--sweep", "1,2,4"])
    with pytest.raises(ServetuneError, match="--workers"):
        parse_words(BenchArgs, ["--model", "m", "--concurrency", "1", "--workers", "999999999999"])
