"""Variant generators and the run order that saves engine restarts."""

from __future__ import annotations

from servetune.engines.config import EngineConfig
from servetune.tune.schema.experiment import Change, ClientSpec, Grid, Matrix
from servetune.tune.schema.variants import apply_change, grid_variants, matrix_variants
from servetune.tune.search.order import count_launches, order_variants

BASE = EngineConfig(engine="vllm", model="/m", flags={"max-num-seqs": 2, "kv-cache-dtype": "fp8"})


def test_matrix_is_baseline_plus_one_change_each() -> None:
    matrix = Matrix(
        baseline="A0",
        changes={"A1": Change(flags={"kv-cache-dtype": "auto"}), "A2": Change(flags={"max-num-seqs": None})},
    )
    variants = matrix_variants(BASE, ClientSpec(), matrix)
    assert [v.name for v in variants] == ["A0", "A1", "A2"]
    assert variants[0].baseline and variants[0].config == BASE
    assert variants[1].config.flags == {"max-num-seqs": 2, "kv-cache-dtype": "auto"}
    assert variants[2].config.flags == {"kv-cache-dtype": "fp8"}, "None removes the flag"
    assert variants[1].changes == {"kv-cache-dtype": "auto"}


def test_change_shorthand_and_engine_switch() -> None:
    change = Change.model_validate({"engine": "llamacpp", "model": "tiny", "flags": {"parallel": 2}})
    config, _ = apply_change(BASE, ClientSpec(), change)
    assert config.engine == "llamacpp" and config.model == "tiny"
    assert Change.model_validate({"parallel": 2}).flags == {"parallel": 2}


def test_grid_is_the_cartesian_product() -> None:
    grid = Grid.model_validate({"max-num-seqs": [1, 2, 4], "kv-cache-dtype": ["auto", "fp8"]})
    variants = grid_variants(BASE, ClientSpec(), grid)
    assert len(variants) == 6 and variants[0].baseline
    assert {v.name for v in variants} >= {"max-num-seqs=4,kv-cache-dtype=auto"}


def test_client_dimensions_share_a_launch_and_ordering_saves_restarts() -> None:
    # Client settings outermost: the declared order restarts the engine for every cell.
    grid = Grid.model_validate({"client.sampling": [None, "x"], "max-num-seqs": [1, 2, 4]})
    variants = grid_variants(BASE, ClientSpec(), grid)
    assert count_launches(variants) == 6
    ordered = order_variants(variants)
    assert count_launches(ordered) == 3
    assert ordered[0].baseline
    assert sorted(v.key() for v in ordered) == sorted(v.key() for v in variants)


def test_stage_is_part_of_the_identity() -> None:
    a = matrix_variants(BASE, ClientSpec(), Matrix(changes={"x": Change()}), stage="r1")[0]
    b = matrix_variants(BASE, ClientSpec(), Matrix(changes={"x": Change()}), stage="r2")[0]
    assert a.launch_key() == b.launch_key() and a.key() != b.key()
