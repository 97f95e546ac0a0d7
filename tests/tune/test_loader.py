"""An invalid experiment is rejected before anything launches, naming the line and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servetune.errors import ServetuneError
from servetune.tune.schema.loader import load_experiment, parse_experiment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tune"

GOOD = """\
name: t
engine:
  engine: vllm
  model: /models/m
  flags:
    max-model-len: 131072
    max-num-seqs: 2
suite:
  probes:
    decode_speed:
    memory_headroom:
slos:
  memory_headroom_pct: 5
variants:
  matrix:
    changes:
      A1: {kv-cache-dtype: auto}
"""


def reject(text: str) -> str:
    with pytest.raises(ServetuneError) as info:
        parse_experiment(text, "exp.yaml")
    return str(info.value)


def test_a_good_file_loads() -> None:
    exp = parse_experiment(GOOD)
    assert exp.engine.flags["max-num-seqs"] == 2
    assert exp.resolved_objective().probe == "decode_speed"


def test_unknown_flag_names_line_and_suggests_the_real_flag() -> None:
    text = reject(GOOD.replace("max-num-seqs: 2", "max-num-seq: 2"))
    assert "exp.yaml:7:" in text and "--max-num-seq is not a vLLM" in text
    assert "did you mean --max-num-seqs" in text


def test_unknown_flag_inside_a_variant() -> None:
    text = reject(GOOD.replace("kv-cache-dtype: auto", "kv-cache-dtyp: auto"))
    assert "exp.yaml:17:" in text and "kv-cache-dtype" in text


def test_wrong_type_of_a_flag_value() -> None:
    text = reject(GOOD.replace("max-num-seqs: 2", "max-num-seqs: two"))
    assert "exp.yaml:7:" in text and "whole number" in text


def test_wrong_type_of_a_schema_field() -> None:
    text = reject(GOOD.replace("suite:\n", "suite:\n  repeats: three\n"))
    assert "exp.yaml:9:" in text and "suite.repeats" in text and "fix: write a number" in text


def test_impossible_slo() -> None:
    text = reject(GOOD.replace("memory_headroom_pct: 5", "memory_headroom_pct: 120\n  ttft_p99_ms: 0"))
    assert "exp.yaml:13:" in text and "can never be met" in text
    assert "exp.yaml:14:" in text and "ttft_p99_ms" in text


def test_unknown_key_suggests_the_right_one() -> None:
    text = reject(GOOD.replace("slos:", "slo:"))
    assert "exp.yaml:12:" in text and "unknown key `slo`" in text and "did you mean `slos`" in text


def test_slo_that_the_suite_cannot_measure() -> None:
    text = reject(GOOD.replace("    memory_headroom:\n", ""))
    assert "memory headroom is not measured" in text and "add `memory_headroom:`" in text


def test_objective_needs_its_probe() -> None:
    text = reject(GOOD + "objective: goodput\n")
    assert "needs the `load_curve` probe" in text


def test_yaml_syntax_error_has_a_line() -> None:
    text = reject(GOOD.replace("  model: /models/m", "  model: [/models/m"))
    assert "exp.yaml:" in text and "not valid YAML" in text


def test_examples_are_valid() -> None:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        load_experiment(path)


def test_published_schema_is_current() -> None:
    import json

    from servetune.tune.schema.experiment import Experiment

    published = json.loads((EXAMPLES.parents[1] / "docs" / "experiment.schema.json").read_text())
    assert published == Experiment.model_json_schema(), "run: servetune experiment-schema > docs/experiment.schema.json"


def test_embedded_demo_matches_the_example() -> None:
    from servetune.demo import EXAMPLE, SIM_EXAMPLE, example_text

    for name in (EXAMPLE, SIM_EXAMPLE):
        assert example_text(name) == (EXAMPLES / name).read_text(), f"copy examples/tune/{name} to tune/data"


def test_grid_client_dimension_checks_presets() -> None:
    grid = GOOD.replace(
        "  matrix:\n    changes:\n      A1: {kv-cache-dtype: auto}\n",
        "  grid:\n    client.sampling: [greedy, hot]\n    max-num-seqs: [1, 2]\n",
    )
    text = reject(grid.replace("variants:", "sampling_presets: {greedy: {temperature: 0}}\nvariants:"))
    assert "sampling preset `hot` is not defined" in text and "greedy" not in text.split("hot")[0][-40:]


def test_check_lists_variants_in_run_order_without_launching(tmp_path: Path) -> None:
    """The seed's round 2 with its model's config.json at hand (servetune's bundled copy, no weights): all 14
    variants fit and launch, in run order (without the model, every one is skipped: test_feasibility.py)."""
    from typer.testing import CliRunner

    from servetune.cli.entry import app
    from servetune.model.bundled import bundled_model

    text = (EXAMPLES / "qwen36-27b-2xa100-r2.yaml").read_text()
    exp = tmp_path / "r2.yaml"
    exp.write_text(text.replace("/models/Qwen3.6-27B", str(bundled_model("qwen3.6-27b"))))
    result = CliRunner().invoke(app, ["tune", str(exp), "--check"])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    assert "14 variants, 14 engine starts" in result.output
    assert "R2-A4-mtp4" in result.output and "× 3 repeats" in result.output


def test_flags_read_1k_as_vllm_does_and_take_additional_config(tmp_path: Path) -> None:
    """`1k` is 1000 as vLLM reads it (not 1024), and `additional-config`, a real vLLM flag, is taken as its JSON
    value: what `--check --json` says the first variant will launch with."""
    from typer.testing import CliRunner

    from servetune.cli.entry import app

    flags = {"max-model-len": "1k", "additional-config": {"gdn_prefill_backend": "triton"}}
    exp = {
        "name": "flags",
        "engine": {"engine": "vllm", "model": "qwen3.6-27b", "flags": flags},
        "hardware": {"gpu": "H200"},
        "suite": {"repeats": 1, "probes": {"decode_speed": None}},
        "objective": "decode_tok_s",
        "variants": {"matrix": {"baseline": "base", "changes": {"short": {"max-num-seqs": 8}}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    result = CliRunner().invoke(app, ["tune", str(path), "--check", "--json"])
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["stages"][0]["variants"][0]["config"]
    assert config["flags"]["max-model-len"] == 1000
    assert config["flags"]["additional-config"] == {"gdn_prefill_backend": "triton"}
