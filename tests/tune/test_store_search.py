"""The store keeps every finished run across sessions; search asks within its budget and replays."""

from __future__ import annotations

from pathlib import Path

import pytest

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.suite.result import ProbeResult
from servetune.tune.results.result import Failure, RunResult
from servetune.tune.results.store import Store
from servetune.tune.schema.experiment import ClientSpec, Search
from servetune.tune.schema.variants import Variant
from servetune.tune.search.search import SearchSession


def _variant(name: str, seqs: int) -> Variant:
    return Variant(name=name, config=EngineConfig(model="/m", flags={"max-num-seqs": seqs}), client=ClientSpec())


def test_runs_survive_reopening_and_resume_rules(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.check_experiment("abc", resume=False)
    v1, v2 = _variant("a", 1), _variant("b", 2)
    store.add_variant(v1, 0)
    store.add_variant(v2, 1)
    store.add_run(
        RunResult(
            variant_key=v1.key(),
            probe="decode_speed",
            repeat=0,
            wall_s=1.0,
            result=ProbeResult(probe="decode_speed", figures={"output_tok_s": 10.0}),
        )
    )
    store.set_status(
        v2.key(), "failed", failure=Failure(klass="died_under_load", excerpt="Killed", during="load_curve")
    )
    store.close()

    again = Store(tmp_path / "s.db")
    with pytest.raises(ServetuneError, match="--resume"):
        again.check_experiment("abc", resume=False)
    with pytest.raises(ServetuneError, match="different experiment"):
        again.check_experiment("other", resume=True)
    again.check_experiment("abc", resume=True)
    again.add_variant(v1, 5)  # known already: position and status are kept
    records = again.records()
    assert [r.variant.name for r in records] == ["a", "b"]
    assert records[0].status == "pending" and records[0].runs[0].result.figures["output_tok_s"] == 10.0
    assert again.finished_runs(v1.key()) == {("decode_speed", 0)}
    assert records[1].failure and records[1].failure.during == "load_curve"


def _objective(point: dict) -> float:
    return -((point["max-num-seqs"] - 6) ** 2) + (1.0 if point["kv-cache-dtype"] == "auto" else 0.0)


SPACE = Search.model_validate(
    {
        "space": {"max-num-seqs": {"int": [1, 16]}, "kv-cache-dtype": {"choice": ["auto", "fp8"]}},
        "budget_gpu_minutes": 100,
        "max_trials": 12,
        "seed": 3,
    }
)


def test_search_asks_within_trials_and_skips_infeasible_points() -> None:
    session = SearchSession(SPACE, "max", feasible=lambda p: ["does not fit"] if p["max-num-seqs"] > 12 else [])
    seen = []
    while (point := session.ask()) is not None:
        assert point["max-num-seqs"] <= 12
        seen.append(point)
        session.tell(point, _objective(point), gpu_minutes=1.0)
    assert len(seen) == 12 and session.spent_gpu_minutes == 12.0
    best = max(seen, key=_objective)
    assert abs(best["max-num-seqs"] - 6) <= 3


def test_search_budget_and_replay() -> None:
    search = SPACE.model_copy(update={"budget_gpu_minutes": 5.0})
    session = SearchSession(search, "max")
    for seqs in (2, 4):
        session.replay({"max-num-seqs": seqs, "kv-cache-dtype": "auto"}, float(seqs), gpu_minutes=2.0)
    assert session.trials == 2 and not session.exhausted()
    point = session.ask()
    assert point is not None
    session.tell(point, None, gpu_minutes=2.0)  # a failed trial still spends its budget
    assert session.exhausted() and session.ask() is None


def test_a_locked_experiment_folder_refuses_a_second_run_naming_the_holder(tmp_path: Path) -> None:
    first = Store(tmp_path / "servetune.db")
    first.lock()
    second = Store(tmp_path / "servetune.db")
    with pytest.raises(ServetuneError) as refused:
        second.lock()
    assert f"{tmp_path} is in use by servetune pid " in refused.value.problem and "--out" in str(refused.value.fix)
    first.close()
    second.lock()  # released at close
    second.close()
