"""The tuning report says what matters: the objective column first and never scrolled away, numbers for people,
the trade-offs the objective hides (with their price, by the ranking's own significance rule), concurrency on the
curves, the winner ringed and labelled in the Pareto view — checked in headless Chromium at 1280 px (what is
visible where), with a screenshot in the test output; and the terminal summary fits the terminal."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import boxes, browser_page, output_dir
from tune_synthetic import experiment, records

from servetune.report.files import write_reports
from servetune.report.tables import tradeoffs
from servetune.report.terminal import decision_lines, outcome_lines
from servetune.tune.results.rank import Edge, Ranking, edges, rank
from servetune.tune.results.recommend import recommend
from servetune.tune.results.result import RunResult, VariantRecord
from servetune.tune.schema.experiment import Experiment, RankingSpec


def with_a_tradeoff(items: list[VariantRecord]) -> list[VariantRecord]:
    """D1-same answers the first token 70% sooner under load than the others (the H200 finding's shape)."""
    out = []
    for record in items:
        if record.variant.name != "D1-same":
            out.append(record)
            continue
        runs: list[RunResult] = []
        for run in record.runs:
            if run.probe == "load_curve":
                points = [{**p, "ttft_p99_ms": p["ttft_p99_ms"] * 0.3} for p in run.result.points]
                run = run.model_copy(update={"result": run.result.model_copy(update={"points": points})})
            runs.append(run)
        out.append(record.model_copy(update={"runs": runs}))
    return out


@pytest.fixture(scope="module")
def ranked() -> Ranking:
    return rank(experiment(), with_a_tradeoff(records()))


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory, ranked: Ranking) -> Path:
    out = tmp_path_factory.mktemp("tune-report")
    exp = experiment()
    write_reports(out, exp, ranked, recommend(exp, ranked), {"python": "3.11", "gpus": "none"})
    return out


def test_tradeoffs_use_the_rankings_rule(ranked: Ranking) -> None:
    found = tradeoffs(ranked)
    assert found and found[0].variant == "D1-same" and found[0].metric.startswith("TTFT p99 at concurrency")
    assert found[0].change.significant and found[0].change.pct == pytest.approx(-70, abs=2)
    assert found[0].price is not None and found[0].price.pct == pytest.approx(100 * (71.4 - 85) / 85, abs=2)
    text = found[0].text("decode tok/s")
    assert "vs A1-bf16-kv" in text and "for decode tok/s -16" in text
    assert len([t for t in found if t.variant == "D1-same" and t.metric.startswith("TTFT p99")]) == 1
    strict = Ranking(ranked.objective, ranked.entries, ranked.winner, ranked.reason, min_effect_pct=80.0)
    assert not any(t.variant == "D1-same" and "TTFT" in t.metric for t in tradeoffs(strict))  # a 70% gain < 80%


def test_terminal_summary_fits_the_terminal(ranked: Ranking, report_dir: Path) -> None:
    files = {"html": report_dir / "report.html", "recommendation": report_dir / "recommendation.txt"}
    for width in (80, 120):
        lines = outcome_lines(ranked, files, width=width)
        assert all(len(line) <= width for line in lines), (width, [x for x in lines if len(x) > width])
        text = "\n".join(lines)
        assert text.count(ranked.reason[:40]) == 1  # the reason once
        assert "decode, 1 stream, tok/s, higher is better" in text  # a header with the unit
        assert "Trade-offs" in text and "D1-same" in text
    assert not re.search(r"\d\.\de[+-]\d\d", "\n".join(outcome_lines(ranked, files, width=100)))


def test_the_decision_is_the_winner_against_the_baseline_by_the_rankings_rule(ranked: Ranking) -> None:
    text = " ".join(" ".join(decision_lines(ranked, 100)).split())
    assert ranked.winner is not None and ranked.winner.record.variant.name == "A1-bf16-kv"
    assert text.startswith("Decision: A1-bf16-kv (kv-cache-dtype=auto)") and "for the baseline A0" in text
    d = ranked.winner.deltas[("decode_speed", "output_tok_s")]
    assert (
        d.significant
        and "+20.3% ± 2.1% (95% interval" in text
        and "outside the noise" in text
        and "3 and 3 repeats" in text
    )
    exp = experiment()
    strict = rank(exp.model_copy(update={"ranking": RankingSpec(min_effect_pct=80.0)}), with_a_tradeoff(records()))
    kept = " ".join(" ".join(decision_lines(strict, 100)).split())
    assert kept.startswith("Decision: keep the baseline A0") and "a tie" in kept, kept
    assert "Decision" in "\n".join(outcome_lines(ranked, {}, width=100)), "servetune tune prints it too"


@pytest.mark.browser
def test_tune_report_in_chromium_at_1280px(report_dir: Path) -> None:
    html = report_dir / "report.html"
    text = html.read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', ""), "no network"
    assert not re.search(r"\d\.\de[+-]\d\d", text), "no scientific notation"
    with browser_page(html.as_uri(), width=1280) as (loop, page):
        shot = loop.run_until_complete(page.screenshot(output_dir() / "tune-report-1280.png"))
        assert shot.stat().st_size > 50_000
        (objective,) = boxes(loop, page, "#summary th.objective")
        assert "objective" in objective["text"] and "tok/s" in objective["text"]
        assert objective["left"] >= 0 and objective["right"] <= 1280, "the objective column is on screen"
        first_figure = boxes(loop, page, "#summary tr:first-child th")[4]
        assert objective["right"] <= first_figure["left"] + 1, "the objective comes before the other figures"
        (tradeoff,) = boxes(loop, page, "#tradeoffs li:first-child")
        assert "D1-same" in tradeoff["text"] and tradeoff["top"] < boxes(loop, page, "#summary")[0]["top"]
        winner_label = boxes(loop, page, "text.winner-label")
        assert winner_label and winner_label[0]["text"].startswith("★ A1-bf16-kv") and winner_label[0]["width"] > 20
        assert len(boxes(loop, page, "text.point-label")) >= 3  # concurrency written on the curve
        svgs = boxes(loop, page, "svg")
        assert len(svgs) >= 4 and all(s["width"] > 200 and s["right"] <= 1280 for s in svgs)
    with browser_page(html.as_uri(), width=760) as (loop, page):  # narrow: the table scrolls, the objective stays
        before = boxes(loop, page, "#summary td.objective")[0]
        loop.run_until_complete(page.eval("document.querySelector('.scroll').scrollLeft = 10000"))
        scrolled = loop.run_until_complete(page.eval("document.querySelector('.scroll').scrollLeft"))
        after = boxes(loop, page, "#summary td.objective")[0]
        assert scrolled > 0, "the table is wider than 760 px"
        assert after["left"] == pytest.approx(before["left"], abs=1) and after["right"] <= 760
        loop.run_until_complete(page.screenshot(output_dir() / "tune-report-760-scrolled.png"))


def scaled(items: list[VariantRecord], name: str, factor: float) -> list[VariantRecord]:
    """`name`'s decode speed × factor in every repeat."""
    out = []
    for record in items:
        runs = []
        for run in record.runs:
            if record.variant.name == name and run.probe == "decode_speed":
                figures = {k: v * factor for k, v in run.result.figures.items() if v is not None}
                run = run.model_copy(update={"result": run.result.model_copy(update={"figures": figures})})
            runs.append(run)
        out.append(record.model_copy(update={"runs": runs}))
    return out


def _files(exp: Experiment, ranked: Ranking, out: Path) -> dict[str, str]:
    """recommendation.txt, summary.md and report.html of a ranking, as text (the HTML unescaped, one line)."""
    paths = write_reports(out, exp, ranked, recommend(exp, ranked), {})
    texts = {kind: paths[kind].read_text() for kind in ("recommendation", "markdown", "html")}
    texts["html"] = html.unescape(texts["html"])
    return texts


def test_the_decision_says_tie_when_the_ranking_does(tmp_path: Path) -> None:
    """A1 (85 tok/s) and B2 (86 tok/s, with the headroom to meet its SLO) tie; A1 wins as the cheaper: the screen
    says "a tie" with both figures and the interval before the gain over the baseline."""
    exp = experiment()
    items = [r for r in records() if r.variant.name in {"A0", "A1-bf16-kv", "B2-util-0.94"}]
    items = [
        r.model_copy(
            update={
                "runs": [
                    run.model_copy(update={"result": run.result.model_copy(update={"figures": {"headroom_pct": 6.0}})})
                    if run.probe == "memory_headroom"
                    else run
                    for run in r.runs
                ]
            }
        )
        for r in items
    ]
    ranked = rank(exp, items)
    assert ranked.winner is not None and ranked.winner.record.variant.name == "A1-bf16-kv"
    other = next(e for e in ranked.entries if e.record.variant.name == "B2-util-0.94")
    assert other.tie_with_winner
    text = " ".join(" ".join(decision_lines(ranked, 100)).split())
    assert re.search(
        r"a tie with B2-util-0\.94 \(8\d\.\d ± [\d.]+\): -\d\.\d% ± [\d.]+% \(95% interval\), inside", text
    )
    assert "Against the baseline A0 (7" in text and "outside the noise" in text, text
    assert "edge of the range" not in text, "kv-cache-dtype is not a number"
    table = "\n".join(outcome_lines(ranked, {}, width=100))
    assert "meets SLOs (tie with ★)" in table
    tie = re.search(r"a tie with B2-util-0\.94 \(.*?threshold", text)
    assert tie is not None
    files = _files(exp, ranked, tmp_path)
    for kind, written in files.items():
        assert f"A1-bf16-kv is {tie.group(0)}." in written, kind  # the screen's words, from the one rule
    assert files["recommendation"].splitlines()[1].startswith("# tie: A1-bf16-kv is a tie with B2-util-0.94 (")
    terminal = "\n".join(outcome_lines(ranked, {"recommendation": tmp_path / "recommendation.txt"}, width=100))
    assert terminal.count("a tie with B2-util-0.94") == 1, "the screen says it once, in the decision"


def test_the_decision_says_when_the_best_is_at_the_edge_of_the_range_tried(tmp_path: Path) -> None:
    """max-num-seqs 1, 2 (the baseline) and 3 were tried: the winner at 3 is at the largest, at 1 at the smallest."""
    exp = experiment()
    items = [r for r in records() if r.variant.name in {"A0", "A2-no-mtp", "D1-same"}]
    top = rank(exp, scaled(items, "D1-same", 1.3))
    assert top.winner is not None and top.winner.record.variant.name == "D1-same"
    assert edges(top) == [Edge("max-num-seqs", 3.0, "largest", [1.0, 2.0, 3.0])]
    text = " ".join(" ".join(decision_lines(top, 100)).split())
    edge = "The best is at the edge of the range tried: max-num-seqs=3 is the largest value tried (1, 2, 3)"
    assert edge in text
    for kind, written in _files(exp, top, tmp_path).items():
        assert edge in written, kind  # recommendation.txt, summary.md and report.html, from `rank.edges`
    assert f"# edge: {edge}" in (tmp_path / "recommendation.txt").read_text()
    bottom = rank(exp, scaled(items, "A2-no-mtp", 2.0))
    assert [e.side for e in edges(bottom)] == ["smallest"]
    middle = rank(exp, scaled(scaled(items, "A2-no-mtp", 1.2), "D1-same", 1.0))
    assert middle.winner is not None and middle.winner.record.variant.name == "A0" and edges(middle) == []
