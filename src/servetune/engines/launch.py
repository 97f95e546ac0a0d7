"""`launch(cfg)` → a ready `RunningEngine`, or `EngineLaunchError` with the failure class and its proof.

Lifecycle: free port → own process group with a per-launch log → poll process, log and HTTP until
`/health` is 200 and `/v1/models` lists the served name (or the engine dies, or the startup timeout passes)
→ facts from the log → `stop()` = SIGTERM to the group, SIGKILL after a grace, proof that nothing is left.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from servetune.control.client import ControlClient, ControlTimeouts, normalize_base_url
from servetune.control.liveness import ProbeOutcome, generate_one_token
from servetune.engines.adapter import EngineAdapter
from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import EngineLaunchError, FailureClass, FailureInfo, classify_log, tail_excerpt
from servetune.engines.readiness import probe
from servetune.engines.registry import adapter_for
from servetune.errors import ServetuneError
from servetune.process.group import ProcessGroup, TeardownReport
from servetune.process.interrupts import run_coroutine
from servetune.process.logfollow import LogFollower, read_text
from servetune.process.ports import free_port
from servetune.secrets import Redactor

POLL_S = 0.02
"""Readiness poll period: the mean delay from "ready" to "known" is about half of it plus one probe."""
DEFAULT_GRACE_S = 10.0
PROBE_TIMEOUTS = ControlTimeouts(connect_s=2.0, total_s=2.0)
"""Each readiness probe: a starting engine that takes longer than this to answer is not ready yet."""
EXIT_SETTLE_S = 5.0
"""After the engine's leader exited, how long its other processes (vLLM's engine cores, a launcher's child) may take
to write their last words and exit on their own before they are stopped and the log is read."""


class RunningEngine:
    """A ready engine: its URL, served name, startup facts and log; stop() tears it down with proof.

    For an attached server (`attach`), `group` is None: servetune did not start it, so it never stops it.
    """

    def __init__(
        self,
        cfg: EngineConfig,
        adapter: EngineAdapter | None,
        group: ProcessGroup | None,
        base_url: str,
        facts: EngineFacts,
        log_path: Path | None,
        startup_s: float | None,
        ready_log_offset: int = 0,
    ) -> None:
        self.cfg = cfg
        self.adapter = adapter
        self.group = group
        self.base_url = base_url
        self.model_name = cfg.name
        self.facts = facts
        self.log_path = log_path
        self.startup_s = startup_s
        self._ready_log_offset = ready_log_offset
        self.teardown: TeardownReport | None = None

    @property
    def pid(self) -> int | None:
        return self.group.pid if self.group else None

    def alive(self) -> bool:
        """True while the engine process runs (for an attached server: while /health answers 200)."""
        if self.group is None:
            return run_coroutine(probe(ControlClient(self.base_url, timeouts=PROBE_TIMEOUTS))).health_status == 200
        return self.group.alive()

    def responds(self, deadline_s: float) -> ProbeOutcome:
        """Whether the engine generates one token within `deadline_s`: the watchdog's question after a probe's
        requests failed. A live process is not a working engine: a frozen one (SIGSTOP, a deadlock, a wedged
        GPU) keeps its pid and may still accept connections."""
        return generate_one_token(self.base_url, self.model_name, deadline_s, self.cfg.api_key)

    def classify_death(self) -> FailureInfo | None:
        """None while alive; else why it died after being ready ("died_under_load", with the log's proof)."""
        if self.group is None or self.group.alive() or self.log_path is None:
            return None
        code = self.group.poll()
        after = read_text(self.log_path, start=self._ready_log_offset) or read_text(self.log_path)
        specific = classify_log(after, self.adapter.failure_patterns()) if self.adapter else None
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        cause = f" The log points to {specific.klass}: {specific.hint}" if specific else ""
        hint = (
            f"The engine died after it was ready ({how}). SIGKILL (9) with no error usually means the OOM "
            f"killer or an outside kill; check `dmesg`, lower load or memory settings.{cause}"
        )
        excerpt = specific.excerpt if specific else tail_excerpt(after)
        return FailureInfo(klass="died_under_load", excerpt=excerpt, hint=hint, exit_code=code)

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> TeardownReport | None:
        """SIGTERM → SIGKILL after `grace_s` → proof; None for an attached server (not ours to stop)."""
        if self.group is None:
            return None
        self.teardown = self.group.stop(grace_s=grace_s)
        return self.teardown

    def __enter__(self) -> RunningEngine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RunningEngine({self.cfg.engine} {self.model_name!r} at {self.base_url}, pid={self.pid})"


def log_path_for(cfg: EngineConfig, log_dir: Path, port: int) -> Path:
    """One log file per launch: engine, config key, time, port."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return Path(log_dir) / f"{cfg.engine}-{cfg.key()}-{stamp}-{port}.log"


def launch(
    cfg: EngineConfig,
    *,
    log_dir: Path,
    startup_timeout_s: float = 600,
    host: str = "127.0.0.1",
    port: int | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> RunningEngine:
    """Starts `cfg`'s engine and returns once it serves `cfg.name`; raises EngineLaunchError otherwise.

    When servetune picked the port itself and something grabbed it before the engine bound it, the launch is
    retried once on a new free port.
    """
    check_model_path(cfg)
    try:
        return _launch_once(cfg, log_dir, startup_timeout_s, host, port or free_port(host), on_progress)
    except EngineLaunchError as err:
        if port is not None or err.failure.klass != "port_in_use":
            raise
    return _launch_once(cfg, log_dir, startup_timeout_s, host, free_port(host), on_progress)


def check_model_path(cfg: EngineConfig) -> None:
    """A model given as a local path that is not there fails as `model_missing` before any process starts (vLLM
    takes 15 s to say so as a Hugging Face error). A bare `org/name` is a Hub id and is left to the engine;
    llama.cpp always takes a file."""
    model = cfg.model
    is_path = model.startswith(("/", "./", "../", "~")) or cfg.engine == "llamacpp"
    if is_path and not Path(model).expanduser().exists():
        what = "GGUF file" if cfg.engine == "llamacpp" else "model directory"
        hub = "" if cfg.engine == "llamacpp" else ", or give a Hugging Face id such as Qwen/Qwen3-8B"
        raise EngineLaunchError(
            FailureInfo(
                klass="model_missing",
                excerpt=f"servetune: the {what} {model} does not exist",
                hint=f"check the path{hub}",
            )
        )


def _launch_once(
    cfg: EngineConfig,
    log_dir: Path,
    startup_timeout_s: float,
    host: str,
    port: int,
    on_progress: Callable[[str], None] | None,
) -> RunningEngine:
    adapter = adapter_for(cfg.engine)
    argv = adapter.argv(cfg, host, port)
    env = adapter.env(cfg, host)
    log_path = log_path_for(cfg, log_dir, port)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env_txt = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    log_path.write_text(Redactor.of(cfg).text(f"# servetune launch: {env_txt} {shlex.join(argv)}\n"))
    header = log_path.stat().st_size
    t0 = time.monotonic()
    try:
        group = ProcessGroup.start(argv, log_path=log_path, env=env)
    except OSError as err:
        raise EngineLaunchError(
            FailureInfo(
                klass="exited_early",
                excerpt=f"{shlex.join(argv)}\n{type(err).__name__}: {err}",
                hint=f"The {cfg.engine} command could not be started: is the engine installed in this environment?",
            ),
            str(log_path),
        ) from err
    base_url = f"http://{host}:{port}"
    try:
        max_len = run_coroutine(_wait_ready(cfg, adapter, group, base_url, startup_timeout_s, on_progress))
    except EngineLaunchError as err:
        err.teardown = group.stop(grace_s=DEFAULT_GRACE_S)
        raise
    except BaseException:
        group.stop(grace_s=DEFAULT_GRACE_S)
        raise
    startup_s = time.monotonic() - t0
    ready_offset = log_path.stat().st_size
    facts = adapter.parse_log(read_text(log_path, start=header))
    updates: dict = {}
    if facts.version is None:
        updates["version"] = adapter.version()
    if facts.max_model_len is None and max_len:
        updates["max_model_len"] = max_len
    if updates:
        facts = facts.model_copy(update=updates)
    return RunningEngine(cfg, adapter, group, base_url, facts, log_path, startup_s, ready_log_offset=ready_offset)


def _failure(
    klass_default: FailureClass, text: str, adapter: EngineAdapter, hint: str, code: int | None
) -> FailureInfo:
    """The specific class the log proves, else `klass_default` with the log's last lines as proof."""
    found = classify_log(text, adapter.failure_patterns())
    if found is not None:
        return found.model_copy(update={"exit_code": code})
    return FailureInfo(klass=klass_default, excerpt=tail_excerpt(text), hint=hint, exit_code=code)


async def _wait_ready(
    cfg: EngineConfig,
    adapter: EngineAdapter,
    group: ProcessGroup,
    base_url: str,
    timeout_s: float,
    on_progress: Callable[[str], None] | None,
) -> int | None:
    """Polls until ready; returns the served max_model_len from /v1/models (when the server says it)."""
    follower = LogFollower(group.log_path)
    deadline = time.monotonic() + timeout_s
    last_models: tuple[str, ...] = ()

    def report_progress() -> None:
        for line in follower.new_lines():
            msg = adapter.progress(line)
            if msg and on_progress:
                on_progress(msg)

    async with ControlClient(base_url, api_key=cfg.api_key, timeouts=PROBE_TIMEOUTS) as client:
        while True:
            report_progress()
            if group.poll() is not None:
                await asyncio.to_thread(group.wait_gone, EXIT_SETTLE_S)
                raise _exited(adapter, group)
            p = await probe(client)
            if p.ready_for(cfg.name):
                report_progress()
                return p.max_model_len(cfg.name)
            if p.names:
                last_models = p.names
            if time.monotonic() >= deadline:
                serving = (
                    f" It is up but lists {list(last_models)} instead of {cfg.name!r}: check --served-model-name."
                    if last_models
                    else ""
                )
                raise await asyncio.to_thread(_timed_out, adapter, group, timeout_s, serving)
            await asyncio.sleep(POLL_S)


def _exited(adapter: EngineAdapter, group: ProcessGroup) -> EngineLaunchError:
    """The failure of an engine that exited before it was ready, read from its whole log: the group is stopped
    first (whatever of it had not exited by itself), so no process of it is still writing the line that names
    the cause."""
    report = group.stop(grace_s=DEFAULT_GRACE_S)
    code = report.exit_code if report.exit_code is not None else group.poll()
    failure = _failure(
        "exited_early",
        read_text(group.log_path),
        adapter,
        f"The engine exited (code {code}) before it was ready; the log's last lines say why.",
        code,
    )
    return EngineLaunchError(failure, str(group.log_path))


def _timed_out(adapter: EngineAdapter, group: ProcessGroup, timeout_s: float, serving: str) -> EngineLaunchError:
    """The failure of an engine not ready by its deadline, read from its whole log once the group is stopped (a log
    read while the engine runs may end mid-sentence, before the line that names the cause). An engine that
    exited on its own meanwhile failed as one that exited; one the stop ended failed to start in time, unless its
    log proves a cause."""
    report = group.stop(grace_s=DEFAULT_GRACE_S)
    if report.already_exited:
        return _exited(adapter, group)
    text = read_text(group.log_path)
    found = classify_log(text, adapter.failure_patterns())
    if found is not None:
        return EngineLaunchError(found, str(group.log_path))
    return EngineLaunchError(
        FailureInfo(
            klass="startup_timeout",
            excerpt=tail_excerpt(text),
            hint=f"Not ready after {timeout_s:g} s.{serving} Raise the startup timeout for big models, "
            "or read the log for where it got stuck.",
        ),
        str(group.log_path),
    )


def attach(base_url: str, model: str, *, timeout_s: float = 10.0) -> RunningEngine:
    """A server someone else started: checked for readiness, never stopped by servetune."""
    return run_coroutine(_attach(normalize_base_url(base_url), model, timeout_s))


async def _attach(base_url: str, model: str, timeout_s: float) -> RunningEngine:
    deadline = time.monotonic() + timeout_s
    async with ControlClient(base_url, timeouts=PROBE_TIMEOUTS) as client:
        while True:
            p = await probe(client)
            if p.ready_for(model):
                break
            if time.monotonic() >= deadline:
                if p.health_status is None:
                    raise ServetuneError(
                        f"no server answers at {base_url} ({p.error})", "check the URL and that the server is running"
                    )
                if p.names:
                    raise ServetuneError(
                        f"{base_url} serves {list(p.names)}, not {model!r}",
                        f"pass one of {list(p.names)} as the model name",
                    )
                raise ServetuneError(f"{base_url}/health answers {p.health_status}", "wait for the server to be ready")
            await asyncio.sleep(0.2)
    entry = p.models.find(model) if p.models else None
    engine = {"llamacpp": "llamacpp", "sglang": "sglang"}.get(entry.owned_by or "" if entry else "", "vllm")
    cfg = EngineConfig(engine=engine, model=model)  # type: ignore[arg-type]
    facts = EngineFacts(engine=engine, max_model_len=p.max_model_len(model))
    return RunningEngine(cfg, None, None, base_url, facts, None, None)
