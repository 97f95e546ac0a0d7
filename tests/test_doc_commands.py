"""Every command line of README.md and docs/*.md runs here, for real, on the tiny model, a `servetune mock-server`
or the simulator (tests/doc_commands.py says which lines count and how a line that cannot run here is marked).

Why: a documented command that fails is the first thing a new user meets. Each doc line is one test named
`file:line`; its commands run in the order written, each form of them (`[--json]` without and with the option,
`DIR|CONFIG` each), as `bash -c` with this checkout's `.venv/bin` first on PATH, in a fresh folder holding what
the placeholders stand for (`SUBSTITUTIONS` below), each within a time limit. A one-shot command must exit 0 and
print what it is for (`bench` may exit 1 when it says a validity warning failed the run, as the README
documents: a CPU-starved client does that on a busy machine). A long-running one (`serve`, `sim-serve`,
`mock-server`, `launch`) must get ready and answer `/v1/models`, then stop on the signal its doc names (Ctrl-C;
SIGTERM for serve) sent to its process group, with exit code 0 or 130 and no process of the group left.

The placeholders become real things, built once per module by fixtures: a mock server, an experiment on the
simulator (`exp.yaml`, named `qwen36`: `servetune tune exp.yaml` writes `runs/qwen36`, the folder the docs then
report on), a tuning folder of llama.cpp on the tiny model for the lines that serve or deploy `runs/qwen36` (deploy
writes files for real engines only), a bench folder from a short `bench --save-result`, and measured runs for
`calibrate` (simulated by `estimate --jsonl --json`, the files bench writes). Lines are only ever shortened by flags they
already have, or by the flags `APPENDED` adds, each with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.sim_experiment import sim_experiment

from doc_commands import DocLine, Found, expand, find_lines, scan
from servetune.process.ports import free_port
from servetune.process.proctable import group_members, living

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
FOUND = find_lines(REPO)

MOCK_MODEL = "Qwen/Qwen3-32B"
"""The mock server's model: the name docs/bench.md's lines ask for, so they run unchanged (NAME is it too)."""
SIM_MODEL = "qwen3.6-27b"
"""MODEL: a bundled config (shapes only), as the simulator's own doc lines use."""
ONE_SHOT_S = 240.0
ENGINE_S = 600.0
"""vLLM's CPU build starts in about a minute on two idle cores; a busy machine takes longer."""
READY_S = 120.0
STOP_S = 90.0

EXPERIMENT = sim_experiment("qwen36", "the docs' experiment, on the simulator (two variants, two short probes)")
TUNED = """\
name: tuned
description: "the tuning folder the docs serve and deploy (runs/qwen36): llama.cpp on the tiny model, two variants"
engine:
  engine: llamacpp
  model: tiny
  startup_timeout_s: 120
  flags: {ctx-size: 4096, parallel: 2, threads: 1, metrics: true}
client: {endpoint: completions, tokenizer: tiny}
suite:
  repeats: 1
  warmup_requests: 1
  probes:
    short_latency: {prompt: "Hello", max_tokens: 8}
    decode_speed: {output_tokens: 32}
objective: decode_tok_s
variants:
  matrix:
    baseline: llama-2-slots
    changes:
      llama-1-slot: {parallel: 1}
"""
"""deploy writes files for real engines only, so the folder `serve`/`deploy runs/qwen36` read is a llama.cpp one."""
ENGINE_CONFIG = "engine: sim\nmodel: qwen3.5-4b\nflags: {gpu: L40S, time-scale: 50, max-model-len: 8192}\n"
NEW_CONFIG = (
    "engine: sim\nmodel: qwen3.5-4b\nflags: {gpu: L40S, time-scale: 50, max-model-len: 8192, max-num-seqs: 4}\n"
)
MEASURED = {  # point: (concurrency, requests, input tokens, output tokens)
    "decode": (1, 3, 1024, 128),
    "prefill": (1, 2, 8192, 8),
    "load": (8, 16, 512, 64),
}
MEASURED_FLAGS = ["--max-model-len", "32768", "--language-model-only"]


# ── what the placeholders stand for ─────────────────────────────────────────────────────────────────────────────


@dataclass
class Seeds:
    """What the module's fixtures built once: copied into each line's folder when the line names it."""

    root: Path
    mock_url: str
    tiny_hf: str

    @property
    def tuning(self) -> Path:
        return self.root / "runs" / "tuned"


@dataclass
class Context:
    """One doc line's run: its folder, the seeds, what its placeholders were bound to (one value per line)."""

    cwd: Path
    seeds: Seeds
    line: DocLine
    bound: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    ray_address: str = ""

    def copy(self, seed: Path, name: str) -> str:
        """`name` in the line's folder, a copy of `seed` unless the line already made it."""
        if not (self.cwd / name).exists():
            (self.cwd / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(seed, self.cwd / name)
        return name

    def tuning_folder(self) -> str:
        return self.copy(self.seeds.tuning, "runs/qwen36")

    def bench_folder(self) -> str:
        return self.copy(self.seeds.root / "results", "results")

    def port(self) -> str:
        self.ports.append(free_port())
        return str(self.ports[-1])

    def dir_for(self, command: str) -> str:
        """DIR, bound by the first command of the line that names it."""
        if "DIR" not in self.bound:
            sub = command.split()[1]
            by_command: dict[str, Callable[[], str]] = {
                "launch": lambda: self.seeds.tiny_hf,
                "tiny-model": lambda: "tiny",
                "import": lambda: "imported",
                "serve": lambda: "runs/qwen36",
                "deploy": lambda: "runs/qwen36",
                "report": lambda: self.bench_folder() if self.line.path == "docs/bench.md" else "runs/qwen36",
            }
            if sub not in by_command:
                pytest.fail(f"{self.line.id}: no meaning for DIR in `{command}`: add one to Context.dir_for")
            self.bound["DIR"] = by_command[sub]()
        return self.bound["DIR"]

    def estimate_args(self) -> str:
        """`estimate ...`: the arguments of the same doc's written-out estimate line."""
        for other in FOUND.lines:
            for written in other.commands:
                if other.path == self.line.path and written.startswith("servetune estimate ") and "..." not in written:
                    return expand(written.removeprefix("servetune estimate "))[0]
        pytest.fail(f"{self.line.id}: `estimate ...` but {self.line.path} has no written-out estimate line")


@dataclass(frozen=True)
class Substitution:
    """A placeholder (a regular expression over the written line), what stands in for it, and how it is made."""

    pattern: str
    means: str
    value: Callable[[Context, str], str]
    before_forms: bool = False
    """Replaced before the line's optional parts are expanded (a `[...]` placeholder is not an optional part)."""


SUBSTITUTIONS = [
    Substitution(r"\[engine flags\]", "--enforce-eager --max-model-len 4096 (vLLM's CPU build starts fastest eager)",
                 lambda c, _: "--enforce-eager --max-model-len 4096", before_forms=True),
    Substitution(r"\[vLLM flags\]", "--max-model-len 32K", lambda c, _: "--max-model-len 32K", before_forms=True),
    Substitution(r"^\.venv/bin/servetune\b", "servetune (this checkout's .venv/bin is first on PATH)",
                 lambda c, _: "servetune"),
    Substitution(r"http://127\.0\.0\.1:8000\b", "the mock server's URL (a free port)", lambda c, _: c.seeds.mock_url),
    Substitution(r"--port 8000\b", "--port <a free port> (tests bind free ports only)",
                 lambda c, _: f"--port {c.port()}"),
    Substitution(r"/models/m\b", "the tiny model's HF folder", lambda c, _: c.seeds.tiny_hf),
    Substitution(r"\bEXPERIMENT\.yaml\b", "exp.yaml, the simulator experiment", lambda c, _: "exp.yaml"),
    Substitution(r"(?<![\w.])(FILES|FILE\.\.\.)(?![\w.])", "results/*.json: a vLLM result file and servetune's run",
                 lambda c, _: c.bench_folder() + "/*.json"),
    Substitution(r"\bRESULT_DIR\.\.\.", "A: three runs simulated by estimate --jsonl --json, as bench writes them",
                 lambda c, _: c.copy(c.seeds.root / "A", "A")),
    Substitution(r"\bFILE\b", "exp.yaml (an experiment file)", lambda c, _: "exp.yaml"),
    Substitution(r"\bBENCH_DIR\b", "results: the bench folder of a short `bench --save-result` against the mock",
                 lambda c, _: c.bench_folder()),
    Substitution(r"\bURL\b", "the mock server's URL", lambda c, _: c.seeds.mock_url),
    Substitution(r"\bNAME\b", f"{MOCK_MODEL}, the mock server's model", lambda c, _: MOCK_MODEL),
    Substitution(r"\bMODEL\b", f"{SIM_MODEL}, a bundled config", lambda c, _: SIM_MODEL),
    Substitution(r"\bCONFIG\b", "engine.yaml, an engine config on the simulator", lambda c, _: "engine.yaml"),
    Substitution(r"\bNEW\b", "new.yaml, another engine config on the simulator", lambda c, _: "new.yaml"),
    Substitution(r"\bPROFILE\b", "profile.json", lambda c, _: "profile.json"),
    Substitution(r"\bPATH\b", "estimate.json", lambda c, _: "estimate.json"),
    Substitution(r"\bHEAD:6379\b", "the local Ray cluster's head", lambda c, _: c.ray_address),
    Substitution(r"^servetune estimate \.\.\.", "servetune estimate + the same doc's written-out estimate line",
                 lambda c, _: "servetune estimate " + c.estimate_args()),
    Substitution(r"\bDIR\b", "by the line's first command naming it: launch the tiny model, tiny-model a new "
                 "folder, import a new bench folder, serve/deploy the tuning folder runs/qwen36, report the bench "
                 "folder in docs/bench.md and the tuning folder elsewhere", lambda c, cmd: c.dir_for(cmd)),
]  # fmt: skip
"""In order; COMMAND stands for each of servetune's commands (one run each)."""

SHORTENED = {"--requests": 50, "--num-prompts": 50}
"""Request counts a line gives, capped (the same load, fewer requests: the mock and the simulator answer alike)."""

APPENDED: list[tuple[Callable[[list[str]], bool], Callable[[Context], str], str]] = [
    (lambda w: w[1] in ("mock-server", "sim-serve") and "--port" not in w, lambda c: f"--port {c.port()}",
     "their default port 8000 may be taken: tests bind free ports only"),
    (lambda w: w[1] == "calibrate" and "--iters" not in w, lambda c: "--iters 20",
     "the fit's 200 iterations take a minute on a busy machine; 20 fit the simulated runs as well"),
    (lambda w: w[1] == "serve" and "--engine" in w and w[w.index("--engine") + 1] == "vllm" and "--" in w,
     lambda c: "--enforce-eager", "vLLM's CPU build compiles its graphs otherwise (minutes)"),
]  # fmt: skip
"""(applies to the words, the flag to append, why)."""

UNRESOLVED = re.compile(r"(?:^|\s)([A-Z][A-Z_]{2,}(?:\.\.\.)?|\.\.\.|…)(?=\s|$)")
"""A word of capitals (DIR, RESULT_DIR...) or an ellipsis left in a line: a placeholder nothing stood in for."""


def forms(written: str, ctx: Context) -> Iterator[str]:
    """The shell lines one written command runs as, in order; each is made when the one before it has run (a
    placeholder's folder is copied in only when the line has not made it itself)."""
    text = written
    for sub in SUBSTITUTIONS:
        if sub.before_forms and re.search(sub.pattern, text):
            text = re.sub(sub.pattern, sub.value(ctx, written).replace("\\", r"\\"), text)
    for form in expand(text):
        for sub in SUBSTITUTIONS:
            if not sub.before_forms and re.search(sub.pattern, form):
                form = re.sub(sub.pattern, sub.value(ctx, form).replace("\\", r"\\"), form)
        for name, most in SHORTENED.items():
            for given in re.findall(rf"{name} (\d+)\b", form):
                form = form.replace(f"{name} {given}", f"{name} {min(int(given), most)}")
        words = form.split()
        for applies, append, _why in APPENDED:
            if applies(words):
                form = f"{form} {append(ctx)}"
        if "runs/qwen36" in form.split():
            ctx.tuning_folder()
        if re.search(r"\bCOMMAND\b", form):
            yield from (re.sub(r"\bCOMMAND\b", name, form) for name in command_names())
            continue
        if m := UNRESOLVED.search(form):
            pytest.fail(
                f"{ctx.line.id}: placeholder {m[1]!r} in `{form}` stands for nothing: add it to SUBSTITUTIONS in "
                "tests/test_doc_commands.py, or mark the doc line (tests/doc_commands.py)"
            )
        yield form


def command_names() -> list[str]:
    """servetune's commands, as its own CLI lists them."""
    import typer

    from servetune.cli.entry import app

    command = typer.main.get_command(app)
    return sorted(command.commands)  # type: ignore[attr-defined]


# ── running ─────────────────────────────────────────────────────────────────────────────────────────────────────


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **os.environ,
        **(extra or {}),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
        "NO_COLOR": "1",
        "COLUMNS": "120",
    }


@dataclass
class Done:
    form: str
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"`{self.form}` exited {self.code}\n--- stdout:\n{self.out[-4000:]}\n--- stderr:\n{self.err[-4000:]}"


def run(form: str, cwd: Path, timeout: float, env: dict[str, str]) -> Done:
    """One shell line to its end, in its own process group (stopped by its id when it overruns)."""
    proc = subprocess.Popen(
        ["bash", "-c", form],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"`{form}` ran past {timeout:.0f} s\n{out[-3000:]}\n{err[-3000:]}")
    left = living(group_members(proc.pid))
    assert not left, f"`{form}` left processes behind: {left}"
    return Done(form, proc.returncode, out, err)


class Background:
    """A long-running command in its own process group, its output in a file (read while it runs)."""

    def __init__(self, form: str, cwd: Path, env: dict[str, str]) -> None:
        self.form = form
        self.log_path = cwd / f".doc-test-{time.monotonic_ns()}.out"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", form], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, ready: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = ready()
            if got:
                return got
            if self.proc.poll() is not None:
                pytest.fail(
                    f"`{self.form}` exited {self.proc.returncode} before it was ready:\n{self.output()[-4000:]}"
                )
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"`{self.form}` was not ready in {timeout:.0f} s:\n{self.output()[-4000:]}")

    def stop(self, sig: signal.Signals) -> int:
        """`sig` to the group, then its exit code; fails (after a SIGKILL) when it does not end, or leaves any
        process of its group behind."""
        os.killpg(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"`{self.form}` did not stop on {sig.name} in {STOP_S:.0f} s:\n{self.output()[-4000:]}")
        deadline = time.monotonic() + 10
        while living(group_members(self.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = living(group_members(self.proc.pid))
        assert not left, f"`{self.form}` left processes behind after {sig.name}: {left}"
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.load(reply)


def serves(base_url: str, form: str) -> None:
    """The server answers /v1/models with at least one model."""
    models = get_json(base_url.rstrip("/") + "/v1/models")
    assert models.get("data"), f"`{form}`: {base_url}/v1/models lists no model: {models}"


def words_of(form: str) -> list[str]:
    return shlex.split(form, comments=True)


def option(words: list[str], name: str, default: str | None = None) -> str | None:
    return words[words.index(name) + 1] if name in words else default


def run_dir_of(words: list[str]) -> str:
    """serve's `--run-dir`, its documented default else."""
    return option(words, "--run-dir", "runs/serve") or "runs/serve"


def serve_ready(run_dir: Path, before: int) -> Callable[[], str | None]:
    """The proxy URL once serve's event log says its main engine is ready (the first `before` events are an
    earlier serve's of the same folder)."""

    def ready() -> str | None:
        events = _events(run_dir)[before:]
        if any(e.get("event") == "state" and e.get("state") == "ready" and e.get("role") == "main" for e in events):
            return str(json.loads((run_dir / "serve.json").read_text())["proxy_url"])
        return None

    return ready


def _events(run_dir: Path) -> list[dict[str, Any]]:
    from servetune.operate.events import read_events

    path = run_dir / "events.jsonl"
    return read_events(path) if path.exists() else []


def run_long(form: str, ctx: Context, env: dict[str, str]) -> None:
    """A long-running command: ready, serving, then stopped cleanly by the signal its doc names."""
    words = words_of(form)
    sub = words[1]
    run_dir = ctx.cwd / run_dir_of(words)
    before = len(_events(run_dir))
    bg = Background(form, ctx.cwd, env)
    try:
        if sub == "serve":
            url = bg.wait_for(serve_ready(run_dir, before), ENGINE_S if "--engine" in words else READY_S)
        elif sub == "launch":
            found = bg.wait_for(lambda: re.search(r"ready in [\d.]+ s: (\S+)/v1 serves", bg.output()), ENGINE_S)
            url = found[1]
        else:
            said = "mock server ready on" if sub == "mock-server" else "Application startup complete"
            bg.wait_for(lambda: said in bg.output(), READY_S)
            url = f"http://127.0.0.1:{option(words, '--port')}"
        serves(url, form)
        code = bg.stop(signal.SIGTERM if sub == "serve" else signal.SIGINT)
    finally:
        bg.kill()
    assert code in (0, 130), f"`{form}` exited {code} when stopped:\n{bg.output()[-4000:]}"
    if sub == "serve":
        stopped = [e for e in _events(run_dir)[before:] if e.get("event") == "stopped"]
        assert stopped and stopped[-1].get("clean"), f"`{form}` did not stop cleanly: {stopped}"
    if sub == "launch":
        assert "processes left: none" in bg.output(), bg.output()[-2000:]


def run_switch(form: str, ctx: Context, env: dict[str, str]) -> None:
    """`serve --switch NEW [--check]`: the running serve it talks to is started first (`serve CONFIG` with the line's
    own `--run-dir`, as a user would have it), then switched (or only asked for the plan), then stopped."""
    words = words_of(form)
    given = ["--run-dir", words[words.index("--run-dir") + 1]] if "--run-dir" in words else []
    run_dir = ctx.cwd / run_dir_of(words)
    before = len(_events(run_dir))
    blue = Background(shlex.join(["servetune", "serve", "engine.yaml", *given]), ctx.cwd, env)
    try:
        blue.wait_for(serve_ready(run_dir, before), READY_S)
        done = run(form, ctx.cwd, ONE_SHOT_S, env)
        if "--check" in words:  # the plan only: printed, nothing started
            assert done.code == 0 and "switch plan:" in done.out + done.err, str(done)
            assert not any(e.get("event") == "switch_started" for e in _events(run_dir)[before:]), str(done)
        else:
            assert done.code == 0 and "switched in" in done.out + done.err, str(done)
            assert any(e.get("event") == "switch_done" for e in _events(run_dir)[before:]), str(done)
        code = blue.stop(signal.SIGTERM)
        assert code in (0, 130), f"the switched serve exited {code}:\n{blue.output()[-4000:]}"
    finally:
        blue.kill()


def check_one_shot(done: Done, ctx: Context) -> None:
    """Exit 0 (bench: or 1 for the validity verdict it prints) and the output the command is for."""
    words = words_of(done.form)
    sub = words[1]
    if sub == "bench" and done.code == 1 and "validity warning" in done.err:
        pass  # the documented exit code of a run the client limited (busy machine): the line itself worked
    else:
        assert done.code == 0, str(done)
    text = done.out + done.err
    if "--help" in words:
        assert "usage" in text.lower(), str(done)
        return
    if ">" in words:  # written to a file instead of stdout
        target = ctx.cwd / words[words.index(">") + 1]
        assert target.stat().st_size > 0, str(done)
        published = REPO / words[words.index(">") + 1]
        if published.exists():
            assert target.read_text() == published.read_text(), f"{published} is not what `{done.form}` prints"
        return
    if _json_to_stdout(words):
        json.loads(done.out)
        return
    says: dict[str, str] = {
        "plan": "vllm serve",
        "plan-seeds": "seed 000",
        "check": "PASS",
        "bench": "completed",
        "import": "run(s)",
        "report": "html",
        "tune": "seqs-4",
        "experiment-schema": '"properties"',
        "estimate": "simulator: KV cache",
        "calibrate": "calibration profile written",
        "tiny-model": "gguf:",
        "deploy": "",
    }
    assert sub in says, f"{ctx.line.id}: no check for `{sub}` output: add one to check_one_shot"
    assert says[sub] in text and text.strip(), str(done)
    if sub == "bench" and "--html" in words:
        assert (ctx.cwd / str(option(words, "--html"))).stat().st_size, str(done)
    if sub == "bench" and "--save-result" in words:
        assert list((ctx.cwd / str(option(words, "--result-dir", "."))).glob("*.json")), str(done)
    if sub == "tune" and "--check" not in words:
        assert (ctx.cwd / "runs/qwen36/summary.csv").is_file(), str(done)
    if "--explain" in words:
        assert "explain: TTFT" in text, str(done)
    if sub == "deploy":
        written = [ctx.cwd / p for p in done.out.split()]
        assert written and all(p.is_file() and p.stat().st_size for p in written), str(done)


def _json_to_stdout(words: list[str]) -> bool:
    """`--json` as the last word, or followed by another option: JSON on stdout."""
    if "--json" not in words:
        return False
    k = words.index("--json")
    return k == len(words) - 1 or words[k + 1].startswith("-")


def run_form(form: str, ctx: Context, env: dict[str, str]) -> None:
    words = words_of(form)
    sub = words[1]
    if sub == "serve" and "--switch" in words:
        run_switch(form, ctx, env)
    elif "--help" not in words and (sub in ("mock-server", "sim-serve", "launch") or sub == "serve"):
        run_long(form, ctx, env)
    else:
        launches = sub == "check" and "--url" not in words
        check_one_shot(run(form, ctx.cwd, ENGINE_S if launches else ONE_SHOT_S, env), ctx)


# ── fixtures ────────────────────────────────────────────────────────────────────────────────────────────────────


def setup_files(folder: Path) -> None:
    """The files every line's folder holds: the experiment, two engine configs, the checkout's examples and an
    empty docs/ (`experiment-schema > docs/experiment.schema.json` writes there)."""
    (folder / "exp.yaml").write_text(EXPERIMENT)
    (folder / "engine.yaml").write_text(ENGINE_CONFIG)
    (folder / "new.yaml").write_text(NEW_CONFIG)
    (folder / "examples").symlink_to(REPO / "examples")
    (folder / "docs").mkdir()


def must(form: str, cwd: Path, timeout: float = ONE_SHOT_S) -> Done:
    done = run(form, cwd, timeout, environment())
    assert done.code == 0, f"fixture: {done}"
    return done


@pytest.fixture(scope="module")
def mock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A mock server fast enough that bench's 200-request lines take seconds (20 ms TTFT, 2 ms ITL)."""
    cwd = tmp_path_factory.mktemp("doc-mock")
    port = free_port()
    form = f"servetune mock-server --port {port} --model {MOCK_MODEL} --ttft-ms 20 --itl-ms 2"
    bg = Background(form, cwd, environment())
    try:
        bg.wait_for(lambda: "mock server ready" in bg.output(), READY_S)
        yield f"http://127.0.0.1:{port}"
        bg.stop(signal.SIGINT)
    finally:
        bg.kill()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory, mock_url: str, tiny_model: Any) -> Seeds:
    """The tuning folder, the bench folder and the measured runs the lines' placeholders are copied from."""
    root = tmp_path_factory.mktemp("doc-seeds")
    setup_files(root)
    (root / "tuned.yaml").write_text(TUNED)
    must("servetune tune tuned.yaml", root)
    must(
        f"servetune bench --url {mock_url} --model {MOCK_MODEL} --concurrency 4 --requests 16 --save-result "
        "--save-detailed --result-dir results --accept-warnings",
        root,
    )
    measured = root / "A"
    measured.mkdir()
    (measured / "flags.txt").write_text("\n".join(MEASURED_FLAGS) + "\n")
    for point, (concurrency, requests, prompt, output) in MEASURED.items():
        must(
            f"servetune estimate {SIM_MODEL} {' '.join(MEASURED_FLAGS)} --gpu H200 "
            f"--concurrency {concurrency} --requests {requests} --input-tokens {prompt} --output-tokens {output} "
            f"--jsonl A/{point}.jsonl --json A/{point}.json",
            root,
        )
    return Seeds(root=root, mock_url=mock_url, tiny_hf=str(tiny_model.hf_dir))


@pytest.fixture(scope="module")
def ray_head() -> Iterator[Any]:
    """A one-node Ray cluster on loopback offering `tune_slot: 1`, as docs/experiment.md starts it."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        if os.environ.get("CI"):
            pytest.fail("ray is not installed: run scripts/setup.sh")
        pytest.skip("ray not installed (scripts/setup.sh installs it)")
    from tests.scaleout.cluster import RayCluster

    with RayCluster(workers=0, resource="tune_slot") as cluster:
        yield cluster


# ── the doc lines ───────────────────────────────────────────────────────────────────────────────────────────────


def _sub(command: str) -> str:
    words = command.split()
    return words[1] if len(words) > 1 else ""


def _launches_engine(command: str) -> bool:
    words = command.split()
    sub = _sub(command)
    serves_tuned = sub == "serve" and bool({"runs/qwen36", "DIR", "DIR|CONFIG"} & set(words))
    return (
        sub == "launch"
        or (sub == "check" and "--url" not in words)
        or (sub == "serve" and "--engine" in words)
        or serves_tuned
    )


def _params() -> list[Any]:
    out = []
    for line in FOUND.lines:
        marks = []
        if any(_launches_engine(c) for c in line.commands):
            marks.append(pytest.mark.engine)
        if any("--executor ray" in c for c in line.commands):
            marks += [pytest.mark.ray, pytest.mark.engine]
        out.append(pytest.param(line, id=line.id, marks=marks))
    return out


@pytest.mark.parametrize("line", _params())
def test_doc_line_runs(line: DocLine, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if line.marker is not None:
        pytest.skip(f"{line.marker.kind}: {line.marker.reason}")
    if any(_sub(c) == "demo" for c in line.commands):
        pytest.skip("run by tests/test_demo.py")
    ctx = Context(cwd=tmp_path, seeds=request.getfixturevalue("seeds"), line=line)
    setup_files(tmp_path)
    env = environment()
    if any("--executor ray" in c for c in line.commands):
        cluster = request.getfixturevalue("ray_head")
        ctx.ray_address = cluster.address
        env = environment(cluster.env())
    for written in line.commands:
        for form in forms(written, ctx):
            run_form(form, ctx, env)


def test_the_docs_markers_are_well_formed() -> None:
    assert not FOUND.problems, "\n".join(FOUND.problems)


def test_the_docs_have_the_lines_this_test_is_for() -> None:
    """A guard on the reader itself: the README's Commands table and the docs' code blocks are found."""
    ids = {line.id for line in FOUND.lines}
    assert len(FOUND.lines) >= 30, ids
    commands = {_sub(c) for line in FOUND.lines for c in line.commands}
    assert commands >= {"plan", "launch", "check", "bench", "import", "report", "tune", "serve", "deploy"}, commands
    markers = [line for line in FOUND.lines if line.marker]
    assert len(markers) <= 3, f"markers must stay rare: {[m.id for m in markers]}"


# ── the reader, on made-up docs ─────────────────────────────────────────────────────────────────────────────────


def _scan(text: str) -> Found:
    found = Found()
    scan(text, "x.md", found)
    return found


def test_code_lines_join_continuations_drop_comments_and_take_the_servetune_part() -> None:
    found = _scan(
        "```bash\n"
        "servetune plan --model m \\\n"
        "    --tp 2   # a comment\n"
        "bash scripts/setup.sh && .venv/bin/servetune demo\n"
        "pip install x\n"
        "```\n"
        "```yaml\nservetune: not a command\n```\n"
        "```console\n$ servetune plan-seeds\nservetune output line\n```\n"
        "```\nservetune serve: command line; events in x\n```\n"
    )
    assert [(line.id, line.commands) for line in found.lines] == [
        ("x.md:2", ["servetune plan --model m --tp 2"]),
        ("x.md:4", [".venv/bin/servetune demo"]),
        ("x.md:11", ["servetune plan-seeds"]),
    ]


def test_spans_count_in_a_command_column_and_as_whole_commands_in_prose() -> None:
    found = _scan(
        "| step | command | what |\n|---|---|---|\n"
        "| a | `servetune plan-seeds`, `servetune serve DIR\\|CONFIG` | `servetune bench --x` |\n"
        "Prose: `servetune bench` and `servetune bench --save-result` name things; `servetune report DIR` runs,\n"
        "so does `servetune COMMAND --help`.\n"
    )
    assert [(line.id, line.where, line.commands) for line in found.lines] == [
        ("x.md:3", "table", ["servetune plan-seeds", "servetune serve DIR|CONFIG"]),
        ("x.md:4", "prose", ["servetune report DIR"]),
        ("x.md:5", "prose", ["servetune COMMAND --help"]),
    ]


def test_markers_need_a_kind_and_a_reason_and_a_line_beside_them() -> None:
    found = _scan(
        "`servetune tune FILE --x` <!-- doc-test: gpu-only (needs a CUDA GPU) -->\n"
        "`servetune tune FILE --y` <!-- doc-test: skip -->\n"
        "`servetune tune FILE --z` <!-- doc-test: maybe (why) -->\n"
        "no command here <!-- doc-test: skip (orphan) -->\n"
        "<!-- doc-test: gpu-only (GPU nodes) -->\n"
        "```bash\nservetune tune a.yaml\n# doc-test: skip (its own reason)\nservetune tune b.yaml\n```\n"
        "```bash\n# doc-test: skip (nothing below)\n```\n"
    )
    marked = {line.id: line.marker.reason if line.marker else None for line in found.lines}
    assert marked == {
        "x.md:1": "needs a CUDA GPU",
        "x.md:2": None,
        "x.md:3": None,
        "x.md:7": "GPU nodes",
        "x.md:9": "its own reason",
    }
    assert [p.split(": ", 1)[0] for p in found.problems] == ["x.md:2", "x.md:3", "x.md:4", "x.md:12"], found.problems


def test_optional_parts_and_alternatives_expand_plain_form_first() -> None:
    assert expand("servetune tune E [--resume] [--check [--json]]") == [
        "servetune tune E",
        "servetune tune E --resume",
        "servetune tune E --check",
        "servetune tune E --check --json",
    ]
    assert expand("servetune serve DIR|CONFIG") == ["servetune serve DIR", "servetune serve CONFIG"]
    assert expand("pip install 'servetune[ray]'") == ["pip install 'servetune[ray]'"]
