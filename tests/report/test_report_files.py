"""The report files from a ranking: CSV with deltas, JSON, markdown, and an HTML page that headless
Chromium renders (screenshot checked by size and DOM content)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))

from tune_synthetic import experiment, records

from servetune.report.files import write_reports
from servetune.tune.rank import rank
from servetune.tune.recommend import recommend


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


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
def test_html_report_renders_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    html = report_dir / "report.html"
    assert "http://" not in html.read_text().replace('xmlns="http://www.w3.org/2000/svg"', ""), "no network"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'ud'}",
    ]
    shot = report_dir / "report.png"
    subprocess.run(
        [browser, *flags, "--window-size=1200,2400", f"--screenshot={shot}", html.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert shot.stat().st_size > 50_000, "a blank page compresses to a few KB"
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", html.as_uri()], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    assert dom.count("<svg") >= 4, "curves, delta bars and the Pareto view are drawn"
    assert "A1-bf16-kv" in dom and "vllm serve" in dom


def test_reports_survive_an_experiment_where_nothing_finished(tmp_path: Path) -> None:
    exp = experiment()
    only_failed = [r for r in records() if r.status == "failed"]
    ranking = rank(exp, only_failed)
    paths = write_reports(tmp_path, exp, ranking, recommend(exp, ranking), {})
    assert ranking.winner is None and "no recommendation" in paths["recommendation"].read_text()
    html = paths["html"].read_text()
    assert "No recommendation" in html and "oom_at_startup" in html
    assert next(csv.DictReader(paths["csv"].open()))["status"] == "failed (oom_at_startup)"
