"""The report files from a ranking: CSV with deltas, JSON and markdown (the HTML page is checked in headless
Chromium by test_tune_report.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))

from tune_synthetic import experiment, records

from servetune.report.files import write_reports
from servetune.tune.results.rank import rank
from servetune.tune.results.recommend import recommend


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    exp = experiment()
    ranking = rank(exp, records())
    write_reports(out, exp, ranking, recommend(exp, ranking), {"python": "3.11", "gpus": "none"})
    return out


def test_summary_csv_has_a_row_per_variant_with_deltas(report_dir: Path) -> None:
    rows = list(csv.DictReader((report_dir / "summary.csv").open()))
    assert [r["variant"] for r in rows][:1] == ["A1-bf16-kv"] and len(rows) == 6
    a1 = rows[0]
    assert a1["winner"] == "yes" and a1["rank"] == "1"
    assert 19 < float(a1["decode_speed.output_tok_s.delta_pct"]) < 21
    crash = next(r for r in rows if r["variant"] == "C9-crash")
    assert crash["status"] == "failed (oom_at_startup)" and "OutOfMemory" in crash["failure"]


def test_results_json_and_recommendation(report_dir: Path) -> None:
    data = json.loads((report_dir / "results.json").read_text())
    assert data["winner"] == "A1-bf16-kv"
    assert data["recommendation"]["serve_command"].startswith("vllm serve")
    a1 = next(v for v in data["variants"] if v["name"] == "A1-bf16-kv")
    assert a1["figures"]["decode_speed.output_tok_s"]["n"] == 3
    assert "--kv-cache-dtype auto" in (report_dir / "recommendation.txt").read_text()
    md = (report_dir / "summary.md").read_text()
    assert "A1-bf16-kv ★" in md and "docker run" in md


def test_reports_survive_an_experiment_where_nothing_finished(tmp_path: Path) -> None:
    exp = experiment()
    only_failed = [r for r in records() if r.status == "failed"]
    ranking = rank(exp, only_failed)
    paths = write_reports(tmp_path, exp, ranking, recommend(exp, ranking), {})
    assert ranking.winner is None and "no recommendation" in paths["recommendation"].read_text()
    html = paths["html"].read_text()
    assert "No recommendation" in html and "oom_at_startup" in html
    assert next(csv.DictReader(paths["csv"].open()))["status"] == "failed (oom_at_startup)"


@pytest.mark.engine
def test_report_of_a_folder_lists_only_the_probes_that_ran(tiny_model, tmp_path: Path) -> None:
    """`servetune report DIR` re-reads the stored experiment: a probe the experiment left out (stored absent, not
    null, which would read back as "run with the defaults") is not added to results.json."""
    exp = {
        "name": "report-probes",
        "engine": {"engine": "llamacpp", "model": "tiny", "flags": {"ctx-size": 2048, "threads": 1}},
        "client": {"endpoint": "completions", "tokenizer": "tiny"},
        "suite": {"repeats": 1, "warmup_requests": 0, "probes": {"decode_speed": {"output_tokens": 16}}},
        "objective": "decode_tok_s",
        "variants": {"matrix": {"baseline": "one", "changes": {"two": {"parallel": 2}}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    out = tmp_path / "out"

    def servetune(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "servetune", *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    servetune("tune", str(path), "--out", str(out))
    servetune("report", str(out))
    probes = json.loads((out / "results.json").read_text())["experiment"]["suite"]["probes"]
    assert set(probes) == {"decode_speed"}, probes
