"""A tune suite is priced before anything launches, by the rule that prices a bench run: a probe run whose records
would not fit in memory, or a launch whose requests could not finish, is refused by `tune --check` and by the run
alike (exit 2), naming its key and the fix. No engine is needed: the check fires before any launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.cli.entry import main
from servetune.errors import ServetuneError
from servetune.load.options import LoadOptions, shape_footprint
from servetune.suite.registry import all_probes
from servetune.tune.schema.loader import load_experiment, parse_experiment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tune"
TINY = (EXAMPLES / "cpu-tiny.yaml").read_text()

HUGE = [
    ("warmup_requests: 2", "warmup_requests: 999999999", "suite.warmup_requests", "days of work"),
    ("requests_per_point: 4 ", "requests_per_point: 999999999 ", "suite.probes.load_curve.requests_per_point", "GiB"),
    ("output_tokens: 256", "output_tokens: 999999999", "suite.probes.load_curve.output_tokens", "GiB"),
    ("{output_tokens: 128}", "{output_tokens: 999999999}", "suite.probes.decode_speed.output_tokens", "GiB"),
    ("[2, 4, 8]", "[2, 4, 999999999]", "suite.probes.load_curve.concurrency", "GiB"),
]


@pytest.mark.parametrize(("old", "new", "key", "why"), HUGE, ids=[h[2] for h in HUGE])
def test_a_suite_that_would_grow_without_bound_is_refused_naming_its_key(
    old: str, new: str, key: str, why: str
) -> None:
    """Each passed `tune --check` and the run grew without bound."""
    assert old in TINY
    with pytest.raises(ServetuneError) as info:
        parse_experiment(TINY.replace(old, new, 1), "x.yaml")
    said = str(info.value)
    assert f": {key}: " in said and why in said and f"fix: lower {key}" in said, said


@pytest.mark.parametrize("check", [True, False], ids=["--check", "the run"])
def test_check_and_the_run_both_refuse_before_any_launch(
    check: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.yaml"
    # a model that is not there: were the check to let it through, the run would fail fast instead of launching
    path.write_text(TINY.replace("warmup_requests: 2", "warmup_requests: 999999999").replace("tiny ", "/no/m.gguf "))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["tune", str(path), "--out", str(out), *(["--check"] if check else [])])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "suite.warmup_requests" in err and "nothing was launched" in err, err
    assert not out.exists()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_experiments_are_within_the_bounds(path: Path) -> None:
    load_experiment(path)


def test_a_probe_is_priced_by_the_runs_it_makes() -> None:
    """Every probe that sends requests declares them, and a bench run's shape prices the same under both."""
    for name, spec in all_probes().items():
        loads = spec.loads(spec.params())
        assert loads or name == "memory_headroom", f"{name} declares no runs"
    options = LoadOptions.parse(concurrency=4, requests=100, warmup_requests=4, output_tokens=128)
    assert options.footprint() == shape_footprint(options.shape(), 128)


CORRECTNESS = """
name: gate
engine: {engine: llamacpp, model: m.gguf, flags: {ctx-size: 1024}}
suite: {probes: {correctness: {max_tokens: %s}, short_latency: {}}}
objective: {probe: short_latency, figure: e2el_ms}
variants: {matrix: {changes: {q8: {cache-type-k: q8_0}}}}
"""


def test_a_probe_sized_by_its_prompts_is_priced_by_their_count() -> None:
    """A suite with the correctness probe (sized by its list of prompts) failed to load at all: the pricing read
    each prompt as a number ('could not convert string to float')."""
    parse_experiment(CORRECTNESS % 32, "x.yaml")
    with pytest.raises(ServetuneError) as info:
        parse_experiment(CORRECTNESS % 999999999, "x.yaml")
    assert "suite.probes.correctness.max_tokens" in str(info.value), str(info.value)
