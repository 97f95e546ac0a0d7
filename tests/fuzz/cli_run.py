"""Running the CLI for the fuzz tests, each command bounded in memory and time, and what every outcome must look like.

Each command runs in a forked child of the test process (the modules the parent imported come with it, so a
run costs milliseconds, not an interpreter start) under an address-space limit of `MEMORY_BYTES` above what the
parent already maps, and is killed at `BOUND_S`. A command that runs out of memory ends in a `MemoryError`,
which the CLI reports as "failed unexpectedly", or is killed: either fails the example as the bug it is, and the
test process itself never grows. In the child, `serve` stops where it would start supervising (`SERVE_STOPPED`):
its arguments, source, sizing and fallback are read for real, and nothing is launched.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import resource
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from servetune.cli import main

BOUND_S = 20.0
"""No single command may take longer than this on a hostile input (the planner's 38 s `--max-num-batched-tokens
1` and its endless `--max-model-len 999999999999` were the cases of 0.1)."""
MEMORY_BYTES = 2 * 1024**3
"""What one command may allocate on top of the test process: a run that needs more is a bug (the 21 GiB of an
unbounded `--requests`)."""
WARM = (
    "servetune.cli.entry",
    "servetune.engines.vllm",
    "servetune.engines.llamacpp",
    "servetune.engines.sglang",
    "servetune.engines.sim",
    "servetune.metrics.journal",
    "servetune.report.files",
    "servetune.report.bench",
    "servetune.tune.loop",
    "servetune.sim.server",
    "servetune.plan.api",
    "servetune.plan.target",
    "servetune.sim.backend",
    "servetune.sim.deployment",
    "servetune.sim.flags",
    "servetune.load.bench_args",
    "servetune.load.runner",
    "servetune.metrics.summary",
    "servetune.metrics.render",
    "servetune.tune.schema.loader",
    "servetune.tune.search.plan",
    "servetune.operate.serving",
    "servetune.operate.supervisor",
    "servetune.operate.control",
    "servetune.operate.deploy",
    "servetune.metrics.imports",
)
"""Modules imported once in the test process, so that each forked command does not import them again (the CLI's
own entry, every command's modules and the engines' adapters: about 0.2 s a command otherwise)."""


@dataclass(frozen=True)
class Outcome:
    """What a command did: its exit code, what it wrote to stderr and to stdout, and how long it took."""

    code: int
    err: str
    out: str
    elapsed: float

    @property
    def said(self) -> str:
        return self.err + self.out


def warm() -> None:
    """Imports the rooms the commands use (see `WARM`)."""
    import importlib

    for name in WARM:
        importlib.import_module(name)


def _mapped_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


SERVE_STOPPED = "fuzz: serve stops here, where it would start supervising"


def _stop_before_serving() -> None:
    """`serve` up to the supervisor and no further: what it would supervise is said, and nothing starts."""
    from servetune.operate.supervisor import Supervisor

    def run(self: Supervisor) -> int:
        print(SERVE_STOPPED)
        return 0

    Supervisor.run = run  # type: ignore[method-assign]


def _child(words: list[str], write: int) -> None:
    limit = _mapped_bytes() + MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _stop_before_serving()
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(words)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - anything past the CLI's boundary is the finding
            code, err = 99, io.StringIO(f"Traceback: {type(exc).__name__}: {exc}")
    body = json.dumps({"code": code, "err": err.getvalue(), "out": out.getvalue(), "s": time.monotonic() - t0})
    with os.fdopen(write, "w") as pipe:
        pipe.write(body)


def run_cli(words: list[str]) -> Outcome:
    """Runs `servetune WORDS` in a forked child bounded by `MEMORY_BYTES` and `BOUND_S`."""
    read, write = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        try:
            os.close(read)
            _child(words, write)
        finally:
            os._exit(0)
    os.close(write)
    chunks: list[bytes] = []
    ended = False
    with os.fdopen(read, "rb") as pipe:
        while not ended and (left := BOUND_S + 5 - (time.monotonic() - t0)) > 0:
            ready, _, _ = select.select([pipe], [], [], left)
            if not ready:
                break
            chunk = os.read(pipe.fileno(), 1 << 16)
            chunks.append(chunk)
            ended = not chunk
    if not ended:  # past the bound: stop it
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    killed = not ended
    elapsed = time.monotonic() - t0
    if killed or not chunks:
        why = "killed at the time bound" if killed else "died without an answer (out of memory?)"
        return Outcome(code=137, err=f"Traceback: the command {why}", out="", elapsed=elapsed)
    body = json.loads(b"".join(chunks))
    return Outcome(code=body["code"], err=body["err"], out=body["out"], elapsed=body["s"])


def assert_clear(words: list[str], done: Outcome) -> None:
    """The outcome every input must have: exit 0, 1 or 2, a message with every non-zero exit, no traceback, no
    uncaught error, within `BOUND_S`."""
    shown = " ".join(words)
    said = done.said
    assert "Traceback" not in said, f"traceback for: {shown}\n{said}"
    assert "failed unexpectedly" not in said, f"an uncaught error for: {shown}\n{said}"
    assert done.code in (0, 1, 2), f"exit {done.code} for: {shown}\n{said}"
    if done.code:  # an `error:` line, typer's usage message, or a verdict saying what failed
        told = any(word in said.lower() for word in ("error", "usage", "fail", "interrupted", "warning"))
        assert told, f"exit {done.code} without a message for: {shown}\n{said}"
    assert done.elapsed < BOUND_S, f"{done.elapsed:.1f} s for: {shown}"


def assert_sensible(words: list[str], done: Outcome) -> None:
    """An accepted input's output makes sense where that is cheap to see: JSON asked for parses and holds no NaN,
    a plan's capacity is a non-negative figure, a summary counts no negative requests; every file `deploy` wrote
    parses and its systemd unit holds only servetune's directives; every run `import` wrote has finite figures, no
    negative count or latency."""
    if done.code == 0 and words[0] == "deploy":
        _sensible_deployment(words, done)
    if done.code == 0 and words[0] == "import":
        _sensible_imports(words)
    if done.code != 0 or "--json" not in words or words[0] not in ("plan", "estimate", "plan-seeds"):
        return
    shown = " ".join(words)
    at = words.index("--json")
    if words[0] == "estimate" and at + 1 < len(words) and not words[at + 1].startswith("-"):
        return  # written to a file, not to stdout
    try:
        data = json.loads(done.out)
    except ValueError:
        raise AssertionError(f"--json printed no JSON for: {shown}\n{done.out[:2000]}") from None
    nan = _find_nan(data)
    assert nan is None, f"NaN at {nan} for: {shown}"
    plans = data if isinstance(data, list) else [data]
    for plan in plans:
        if isinstance(plan, dict) and "max_concurrency" in plan:
            assert plan["max_concurrency"] >= 0 and plan["kv_cache_tokens"] >= 0, f"negative capacity: {shown}"
        summary = plan.get("summary") if isinstance(plan, dict) else None
        if isinstance(summary, dict):
            assert summary.get("completed", 0) >= 0 and summary.get("failed", 0) >= 0, f"bad counts: {shown}"


def _find_nan(node: Any, at: str = "") -> str | None:
    if isinstance(node, float) and math.isnan(node):
        return at or "(top)"
    if isinstance(node, dict):
        return next((p for k, v in node.items() if (p := _find_nan(v, f"{at}.{k}"))), None)
    if isinstance(node, list):
        return next((p for i, v in enumerate(node) if (p := _find_nan(v, f"{at}[{i}]"))), None)
    return None


def _sensible_deployment(words: list[str], done: Outcome) -> None:
    """Each file deploy listed as written: YAML loads (every document), JSON loads, compose and Kubernetes pass the
    validators the deploy tests use, and the systemd unit's directives are exactly servetune's (an input with a line
    break would add one)."""
    from tests.operate.deploy_checks import UNIT_KEYS, unit_lines, validate_compose, validate_kubernetes

    shown = " ".join(words)
    written = [Path(line) for line in done.out.splitlines() if line.strip()]
    assert written, f"deploy wrote nothing and said so with exit 0: {shown}"
    for path in written:
        assert path.is_file(), f"deploy listed {path}, which is not there: {shown}"
        text = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            docs = list(yaml.safe_load_all(text))
            assert all(d is None or isinstance(d, dict) for d in docs), f"{path} is not mappings: {shown}"
            if path.name == "compose.yaml":
                validate_compose(path)
            elif path.parent.name == "kubernetes":
                validate_kubernetes(path)
        elif path.suffix == ".json":
            json.loads(text)
        elif path.suffix == ".service":
            assert unit_lines(path) == UNIT_KEYS, f"the unit's directives changed: {shown}\n{text}"


_FIGURE = ("_ms", "_throughput", "_goodput", "_per_s")
_COUNTS = ("completed", "failed", "duration", "total_input_tokens", "total_output_tokens")


def _sensible_imports(words: list[str]) -> None:
    """Each run file in the --into folder: finite figures, none negative that cannot be (latencies, rates, counts);
    a recomputed summary with no negative request count."""
    shown = " ".join(words)
    into = Path(words[words.index("--into") + 1])
    for path in into.glob("*.servetune.json"):
        body = json.loads(path.read_text())
        for key, value in body["figures"].items():
            assert math.isfinite(value), f"{path.name}: {key} = {value} for: {shown}"
            if key.endswith(_FIGURE) or key in _COUNTS:
                assert value >= 0, f"{path.name}: {key} = {value} for: {shown}"
        summary = body.get("summary") or {}
        assert _find_nan(summary) is None, f"{path.name}: NaN in the summary for: {shown}"
        assert summary.get("completed", 0) >= 0 and summary.get("failed", 0) >= 0, f"bad counts: {shown}"
