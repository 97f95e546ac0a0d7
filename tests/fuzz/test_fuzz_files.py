"""Fuzz the files servetune reads on the way to a file or a running serve: engine configs `deploy` writes
deployments from, other tools' result files `import` reads, and run folders `serve --switch` is pointed at.

- `deploy CONFIG`: a valid engine config (vLLM, llama.cpp, SGLang) with up to three values replaced by hostile ones
  (text with line breaks, `$`, `%`, quotes, control characters, huge and negative numbers), keys deleted or added,
  and hostile options. Refused with a message, or every file written parses, compose and Kubernetes pass their
  validators and the systemd unit holds servetune's directives and no other (`cli_run.assert_sensible`).
- `import FILE`: the shipped samples of every tool (tests/metrics/data) mutated the same way. Exit 0 with finite,
  non-negative figures, or exit 2 naming the file and key; never "failed unexpectedly".
- `serve --run-dir DIR --switch NEW`: DIR holds no serve (missing, a file, empty, a broken or stale `serve.json`),
  NEW is a config or a hostile value. A clear error, at once.

Every command runs in a forked child bounded in memory and time (`cli_run.py`); the draws are seeded and replay the
committed examples first (`examples/<test>/`), as the other fuzz tests do.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, strategies as st

from .cli_run import assert_clear, assert_sensible, run_cli, warm
from .test_fuzz_cli import CLOSED, fuzzed
from .test_fuzz_experiments import _parent, _places

DATA = Path(__file__).resolve().parents[1] / "metrics" / "data"
TEXT = [
    "a\nb", "x\n[Service]\nExecStartPre=/bin/sh -c evil", "x\rExecStart=/bin/evil", "x\u2028y", "\x00", "\t",
    "${HOME}", "$(id)", "$$", "%h", '"q"', "'", "\\", "a: b", "- x", "#c", "{x}", "", " ", "☃", "a" * 300,
]  # fmt: skip
NUMBERS: list[Any] = [0, -1, -0.5, 1e308, 10**15, math.nan, math.inf, -math.inf, "1k", "abc", True, None, [], {}]
HOSTILE = TEXT + NUMBERS


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm()


def _mutate(draw: st.DrawFn, tree: Any, extra_keys: list[str]) -> Any:
    """Up to three places of `tree` replaced by a hostile value, deleted, or given an unknown sibling."""
    for _ in range(draw(st.integers(1, 3))):
        places = _places(tree)
        if not places:
            break
        path = draw(st.sampled_from(places))
        parent = _parent(tree, path)
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(st.sampled_from(HOSTILE))
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(extra_keys + TEXT[:3]))] = draw(st.sampled_from(HOSTILE))
    return tree


# ---- deploy ------------------------------------------------------------------------------------------------------
CONFIGS: list[dict[str, Any]] = [
    {
        "engine": "vllm",
        "model": "/srv/models/Qwen3-8B",
        "served_model_name": "qwen",
        "version": "0.11.0",
        "flags": {"max-model-len": 32768, "api-key": "sk-fuzz", "enable-prefix-caching": True},
        "env": {"VLLM_LOGGING_LEVEL": "INFO", "HF_TOKEN": "hf_fuzz"},
    },
    {"engine": "llamacpp", "model": "/srv/m/model.gguf", "flags": {"ctx-size": 8192, "parallel": 4}},
    {"engine": "sglang", "model": "/models/qwen", "version": "0.5.23", "flags": {"tp-size": 1, "api-key": "k"}},
]
DEPLOY_OPTIONS: dict[str, list[Any]] = {
    "--name": ["chat", "Bad", "a" * 41, *TEXT[:4]],
    "--cold-start-s": ["251", "0", "1e308", "nan", "abc"],
    "--cold-start-source": TEXT,
    "--slo": ["ttft_p99_ms=500", "ttft_p99_ms=1e308", "tpot_p99_ms=0", "error_rate=2", "x=1", "ttft_p99_ms"],
    "--gpu": ["H200", "H200x2", "junk", "A100", "H200x0", "2xL40S"],
    "--gpus": ["1", "0", "-2", "65", "abc"],
    "--target": ["all", "compose", "kubernetes,systemd", "swarm", ""],
}


@st.composite
def deployment(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    config = _mutate(draw, json.loads(json.dumps(draw(st.sampled_from(CONFIGS)))), ["flags", "env", "colour"])
    options = draw(st.lists(st.sampled_from(sorted(DEPLOY_OPTIONS)), max_size=3, unique=True))
    words = [w for option in options for w in (option, str(draw(st.sampled_from(DEPLOY_OPTIONS[option]))))]
    return config, words


def test_deployment_files_parse_whatever_the_config(tmp_path: Path) -> None:
    count = iter(range(1_000_000))

    @fuzzed("deploy-configs")
    @given(deployment())
    def one(case: tuple[dict[str, Any], list[str]]) -> None:
        config, options = case
        folder = tmp_path / str(next(count))
        folder.mkdir()
        source = folder / "engine.yaml"
        source.write_text(yaml.safe_dump(config, allow_unicode=True))
        words = ["deploy", str(source), "--out", str(folder / "out"), *options]
        done = run_cli(words)
        shown = [*words, f"# config: {config!r}"[:2000]]
        assert_clear(shown, done)
        assert done.code in (0, 2), done.said
        assert_sensible(words, done)

    one()


# ---- import ------------------------------------------------------------------------------------------------------
SAMPLES = ["vllm_bench_serve_detailed.json", "vllm_bench_serve_rate8.json", "guidellm_benchmarks.json", "aiperf-c2"]


@st.composite
def result_file(draw: st.DrawFn) -> tuple[str, str, Any]:
    """(sample, file of it mutated, its mutated content): a JSON tree, or an AIPerf record line's."""
    sample = draw(st.sampled_from(SAMPLES))
    if sample != "aiperf-c2":
        return sample, sample, _mutate(draw, json.loads((DATA / sample).read_text()), ["completed", "benchmarks"])
    name = draw(st.sampled_from(["profile_export_aiperf.json", "profile_export.jsonl"]))
    text = (DATA / sample / name).read_text()
    if name.endswith(".json"):
        return sample, name, _mutate(draw, json.loads(text), ["request_count", "input_config"])
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    at = draw(st.integers(0, len(rows) - 1))
    rows[at] = _mutate(draw, rows[at], ["metadata", "metrics", "error"])
    return sample, name, rows


def test_imported_files_are_runs_or_clear_errors(tmp_path: Path) -> None:
    count = iter(range(1_000_000))

    @fuzzed("import-files")
    @given(result_file())
    def one(case: tuple[str, str, Any]) -> None:
        sample, name, content = case
        folder = tmp_path / str(next(count))
        if sample == "aiperf-c2":
            shutil.copytree(DATA / sample, folder / sample)
            path = folder / sample
            with open(path / name, "w") as out:
                if isinstance(content, list):
                    out.writelines(json.dumps(row) + "\n" for row in content)
                else:
                    json.dump(content, out)
        else:
            folder.mkdir()
            path = folder / name
            path.write_text(json.dumps(content))
        words = ["import", str(path), "--into", str(folder / "bench")]
        done = run_cli(words)
        assert_clear([*words, f"# {sample}/{name}: {content!r}"[:2000]], done)
        assert done.code in (0, 2), done.said
        assert_sensible(words, done)

    one()


# ---- serve --switch ----------------------------------------------------------------------------------------------
ABSENT = object()
URLS: list[Any] = [ABSENT, CLOSED, CLOSED, "garbage", "http://[::1", "ftp://x", 5, None, [], {}]
TIMEOUTS: list[Any] = [ABSENT, 5, 5, 0, -1, 1e308, math.nan, math.inf, "x", None, True, []]


@st.composite
def no_serve(draw: st.DrawFn) -> tuple[str, Any, str | None, list[str]]:
    """(kind of run folder, its serve.json when it has one, its token, extra words)."""
    kind = draw(st.sampled_from(["missing", "file", "empty", "binary", "state", "state", "state"]))
    state: Any = None
    if kind == "state":
        drawn = {"control_url": draw(st.sampled_from(URLS)), "switch_timeout_s": draw(st.sampled_from(TIMEOUTS))}
        state = draw(st.sampled_from([{k: v for k, v in drawn.items() if v is not ABSENT}] * 4 + [[1, 2], "x"]))
    token = draw(st.sampled_from(["t0ken", "t0ken", None, "", "\x00"]))
    extra = draw(st.sampled_from([[]] * 6 + [["--port", "0"], ["--engine", "vllm"], ["--", "--tp", "2"], ["x"]]))
    return kind, state, token, extra


def test_switch_without_a_serve_is_a_clear_error(tmp_path: Path) -> None:
    count = iter(range(1_000_000))
    config = tmp_path / "new.yaml"
    config.write_text("engine: vllm\nmodel: /srv/models/Qwen3-8B\n")
    new_values = [str(config), str(config), "/nonexistent.yaml", str(tmp_path), "", "☃"]

    @fuzzed("serve-switch")
    @given(no_serve(), st.sampled_from(new_values))
    def one(case: tuple[str, Any, str | None, list[str]], new: str) -> None:
        kind, state, token, extra = case
        run_dir = tmp_path / f"run-{next(count)}"
        if kind == "file":
            run_dir.write_text("not a folder")
        elif kind != "missing":
            run_dir.mkdir()
        if kind == "binary":
            (run_dir / "serve.json").write_bytes(bytes(range(256)))
        if kind == "state":
            (run_dir / "serve.json").write_text(json.dumps(state))
        if token is not None and run_dir.is_dir():
            (run_dir / "control.token").write_text(token)
        words = ["serve", "--run-dir", str(run_dir), "--switch", new, *extra]
        done = run_cli(words)
        assert_clear([*words, f"# serve.json: {state!r}"], done)
        assert done.code == 2, f"exit {done.code} for: {' '.join(words)}\n{done.said}"
        said = done.err.split("error: ", 1)[-1]
        named = (str(run_dir), "--switch", str(Path(new)), *extra)
        assert any(w in said for w in named), f"names neither the run folder nor --switch: {said}"
        assert done.elapsed < 10, f"{done.elapsed:.1f} s to say there is no serve: {' '.join(words)}"

    one()


SWITCH_STATES: dict[str, dict[str, Any]] = {
    "no control_url": {"switch_timeout_s": 5},  # was "failed unexpectedly: KeyError: 'control_url'"
    "nan timeout": {"control_url": CLOSED, "switch_timeout_s": math.nan},  # was "bad value for ControlTimeouts"
    "negative timeout": {"control_url": CLOSED, "switch_timeout_s": -1},
    "inf timeout": {"control_url": CLOSED, "switch_timeout_s": math.inf},
    "number url": {"control_url": 5, "switch_timeout_s": 5},  # was "5 is not an http(s) URL", naming no run folder
    "broken url": {"control_url": "http://[::1", "switch_timeout_s": 5},
}


@pytest.mark.parametrize("state", list(SWITCH_STATES.values()), ids=list(SWITCH_STATES))
def test_a_broken_serve_state_is_no_serve(state: dict[str, Any], tmp_path: Path) -> None:
    """What a stale or broken `serve.json` held, found by the fuzz test above in draws its seed does not make."""
    config = tmp_path / "new.yaml"
    config.write_text("engine: vllm\nmodel: /srv/models/Qwen3-8B\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "serve.json").write_text(json.dumps(state))
    (run_dir / "control.token").write_text("t0ken")
    words = ["serve", "--run-dir", str(run_dir), "--switch", str(config)]
    done = run_cli(words)
    assert_clear(words, done)
    assert done.code == 2 and f"no running `servetune serve` in {run_dir}" in done.err, done.said
