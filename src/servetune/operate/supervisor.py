"""The supervisor: engines as process groups behind nginx, restarted, fallen back, switched and drained.

One main thread owns every process (engines and nginx are started from it, so the kernel's parent-death
signal ties them to servetune: nothing outlives it, even after a SIGKILL).  Helper threads only talk HTTP —
liveness probes, the control server — and hand their findings to the main loop through a queue.  The loop:

- a role (`main`, and `long` for the dedicated long-prompt upstream) without an engine is started once its
  backoff has passed: `launch()` → acceptance probe → nginx reload → liveness thread;
- an engine whose process died is classified from its log (the adapter's failure classes), its pool is
  switched to the fast 503, and it is restarted after an exponential backoff; K deaths within T seconds switch
  the role to its fallback profile, and the event log says what capacity that gives up;
- an engine whose liveness probe misses its deadline is hung: killed and restarted the same way;
- a role whose starts keep failing gives up: after `give_up_starts` failed starts in a row, or at once for a
  failure no restart cures (a missing model, a refused flag), it switches to its fallback, and once there is
  none left serve stops with exit 1 and the reason (`gave_up`): retrying forever would hide the fault;
- nginx and the control server are parts too: a dead nginx (killed, or died on its own) is restarted with the
  current config after the same backoff, and `/readyz` says not ready until it listens again; a control
  server whose thread ended is started again on its port;
- every start after a role's first (a restart, the fallback) is planned against the device's memory first
  (capacity.py): it waits while memory serve's engines do not hold is still taken (a killed engine's, which the
  GPU driver releases late), up to the startup timeout, and one that cannot fit at all is a failure no restart
  cures;
- a switch request (control server) is planned (capacity.py: side by side, drain-and-replace or refused) and
  runs the procedure the plan chose (switch.py); `--check` only answers the plan;
- SIGTERM/SIGINT: nginx stops accepting and drains the in-flight streams up to the deadline, then the
  engines stop, and the teardown reports prove that no process is left.
"""

from __future__ import annotations

import json
import os
import queue
import secrets as pysecrets
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO, Any

from servetune.control.liveness import ProbeOutcome
from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import RESTART_CANNOT_CURE, EngineLaunchError, classify_log
from servetune.engines.launch import RunningEngine, launch
from servetune.errors import ServetuneError
from servetune.fileio import lock_folder
from servetune.operate.acceptance import accept, bytes_per_token
from servetune.operate.capacity import DeviceChoice, SwitchPlan, plan_start, plan_switch
from servetune.operate.control import LOCK_FILE, STATE_FILE, TOKEN_FILE, ControlServer, SwitchRequest
from servetune.operate.events import EventLog
from servetune.operate.evidence import Sized
from servetune.operate.fallback import Fallback, capacity_of_facts, gives_up
from servetune.operate.liveness import Liveness
from servetune.operate.metrics import SupervisorMetrics
from servetune.operate.proxy import Nginx, NginxGone, ProxySettings, upstream_keepalive
from servetune.operate.role import Hung, Role
from servetune.operate.serve_options import ServeOptions
from servetune.operate.sizing import long_prompt_bytes
from servetune.operate.starts import StartRecord, estimate, record
from servetune.operate.switch import blue_green, drain_and_replace
from servetune.process.logfollow import read_text
from servetune.process.ports import free_port
from servetune.process.proctable import living
from servetune.secrets import Redactor

TICK_S = 0.05
"""Main-loop period: a dead engine (its process gone) is noticed within this."""
MEMORY_POLL_S = 0.5
"""How often a start waiting for memory looks again."""
SWITCH_SLACK_S = 120.0
"""A switch takes green's startup, blue's drain, and this for the acceptance probe and the reload."""


STATUS_STARTS = 5
"""Starts per role `/status` lists (the latest)."""
DOES_NOT_FIT_HINT = (
    "The config cannot fit on its device beside serve's other engines (or alone): lower its "
    "--gpu-memory-utilization / KV space / context, raise --memory-limit-gib, or give a smaller --fallback."
)


class _StopNow(BaseException):
    """Raised by the signal handler while the main thread is inside a launch, so the launch tears down."""


class Supervisor:
    """Runs until SIGTERM/SIGINT (or `request_stop`); `run()` returns the exit code."""

    def __init__(
        self,
        cfg: EngineConfig,
        options: ServeOptions,
        *,
        fallback: Fallback | None = None,
        long_cfg: EngineConfig | None = None,
        origin: str = "command line",
        say: Callable[[str], None] | None = None,
        device: DeviceChoice | None = None,
        measured_cold: Sized | None = None,
    ) -> None:
        if long_cfg is None and options.long_prompt_tokens is not None:
            raise ServetuneError(
                "--long-prompt-tokens needs a dedicated long-prompt engine", "add --long CONFIG (its engine config)"
            )
        self.options = options
        self.origin = origin
        self.device = device or DeviceChoice(limit_gib=options.memory_limit_gib)
        """What the user said of the device (--gpu, --gpus, --memory-limit-gib): what every memory plan measures."""
        self.measured_cold = measured_cold
        """The source's measured cold start (a tuning folder's launch_s): a start estimate before serve measured one."""
        self.starts: list[StartRecord] = []
        """Every start that served, with its time and compile cache: what the next start's estimate comes from."""
        self.say = say
        """Where the events a person at the terminal needs (proxy URL, ready, restarts, switch, stop) are told."""
        self.roles: dict[str, Role] = {"main": Role("main", cfg, fallback=fallback)}
        if long_cfg is not None:
            self.roles["long"] = Role("long", long_cfg)
        self.redactor = Redactor.of(cfg, *(c for c in (long_cfg, fallback.cfg if fallback else None) if c))
        self.metrics = SupervisorMetrics()
        self.queue: queue.Queue[Hung | SwitchRequest] = queue.Queue()
        self.run_dir = options.run_dir
        self.events: EventLog | None = None
        self.nginx: Nginx | None = None
        self.control: ControlServer | None = None
        self._stop_signal: int | None = None
        self.gave_up: str | None = None
        """Why serve stopped on its own (a role or nginx that cannot start); None while it runs."""
        self._in_launch = False
        self._pending: RunningEngine | None = None
        self._bytes_per_token: Sized | None = None
        self.teardown: dict[str, Any] = {}
        self._lock: IO[str] | None = None
        """The run folder's lock file, held open while this serve runs."""
        self._proxy_down_since: float | None = None
        """When nginx was found dead (None while it runs)."""
        self._proxy_attempt = 0
        self._proxy_next_start = 0.0

    def _engines(self) -> list[str]:
        """Every engine this supervisor may put behind the proxy: each role's, and its fallback's."""
        engines: list[str] = [role.cfg.engine for role in self.roles.values()]
        return engines + [role.fallback.cfg.engine for role in self.roles.values() if role.fallback is not None]

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def run(self) -> int:
        self._setup()
        try:
            while self._stop_signal is None and self.gave_up is None:
                self._tick()
                self._drain_queue(TICK_S)
        except _StopNow:
            pass
        finally:
            self._shutdown()
        return 1 if self.gave_up else 0

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Asks the main loop to drain and stop (what SIGTERM does)."""
        self._stop_signal = signum

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self._stop_signal is None
        self._stop_signal = signum
        if first and self._in_launch:
            raise _StopNow()

    def _setup(self) -> None:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ServetuneError(f"cannot create the run folder {self.run_dir}: {err.strerror}") from err
        self._lock = lock_folder(self.run_dir, LOCK_FILE, self._refuse_run_dir)
        self.events = EventLog(self.run_dir / "events.jsonl", self.redactor, echo=self.say)
        port = self.options.listen_port or free_port()
        settings = ProxySettings(
            listen=f"127.0.0.1:{port}",
            read_timeout=self.options.read_timeout(),
            body_bytes=self.options.sizing.body_bytes or Sized(value=1 << 20, source="until an engine says its length"),
            drain_s=Sized(value=self.options.drain_s, source="drain_s"),
            upstream_keepalive=upstream_keepalive(self._engines()),
        )
        self.nginx = Nginx(self.run_dir / "nginx", settings)
        self.nginx.start(self._upstreams())
        self.metrics.proxy_up.set(1)
        # After the first process group started: the reaper's SIGTERM handler (stop everything at once) is
        # installed by then, and ours (drain first) replaces it.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        token = pysecrets.token_urlsafe(24)
        token_path = self.run_dir / TOKEN_FILE
        token_path.touch(mode=0o600, exist_ok=True)
        token_path.chmod(0o600)
        token_path.write_text(token)
        self.control = ControlServer(self, self.options.control_port or free_port(), token)
        self.control.start()
        state = {
            "pid": os.getpid(),
            "proxy_url": self.nginx.url,
            "control_url": self.control.url,
            "events": str(self.events.path),
            "origin": self.origin,
            "switch_timeout_s": self.options.startup_timeout().value + self.options.drain_s + SWITCH_SLACK_S,
        }
        tmp = self.run_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self.run_dir / STATE_FILE)
        self.emit(
            "serving",
            proxy_url=self.nginx.url,
            control_url=self.control.url,
            origin=self.origin,
            nginx_pid=self.nginx.group.pid if self.nginx.group else None,
        )
        for role in self.roles.values():
            self.metrics.set_state(role.name, "starting")
            self.metrics.fallback.labels(role=role.name).set(0)

    def _refuse_run_dir(self, holder: str) -> ServetuneError:
        """The refusal of a run folder another serve holds: its pid and proxy URL (from its serve.json), and how
        to stop it, switch it or serve elsewhere."""
        pid = holder.removeprefix("servetune pid ").partition(" ")[0]
        try:
            state = json.loads((self.run_dir / STATE_FILE).read_text())
            url = f" with its proxy at {state['proxy_url']}" if str(state.get("pid")) == pid else ""
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            url = ""
        who = f"servetune serve pid {pid}{url}" if pid.isdigit() else holder
        return ServetuneError(
            f"the run folder {self.run_dir} is in use by {who} ({LOCK_FILE}: {holder})",
            f"stop that serve (kill -TERM {pid if pid.isdigit() else 'PID'}), switch it to a new config with "
            f"`servetune serve --run-dir {self.run_dir} --switch NEW`, or give this one another --run-dir",
        )

    def _shutdown(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the drain
        self.emit("stopping", signal=self._stop_signal, gave_up=self.gave_up, drain_s=self.options.drain_s)
        for role in self.roles.values():
            self._set_state(role, "draining")
        t0 = time.monotonic()
        if self.nginx:
            report = self.nginx.drain(self.options.drain_s + 1.0)
            self.teardown["nginx"] = report.model_dump() if report else None
        drained_s = round(time.monotonic() - t0, 3)
        for role in self.roles.values():
            self.stop_liveness(role)
            if role.engine:
                report = role.engine.stop(grace_s=self.options.stop_grace_s)
                self.teardown[role.name] = report.model_dump() if report else None
                role.engine = None
            self._set_state(role, "stopped")
        if self._pending is not None:
            self._pending.stop(grace_s=self.options.stop_grace_s)
        while not self.queue.empty():  # switch requests that came too late: answered, not left waiting
            item = self.queue.get_nowait()
            if isinstance(item, SwitchRequest):
                item.result = {"ok": False, "reason": "servetune serve is stopping"}
                item.done.set()
        if self.control:
            self.control.stop()
        clean = all(r is None or not r.get("survivors") for r in self.teardown.values())
        self.emit("stopped", drained_s=drained_s, clean=clean, teardown=self.teardown)
        if self.events:
            self.events.close()
        (self.run_dir / TOKEN_FILE).unlink(missing_ok=True)
        (self.run_dir / STATE_FILE).unlink(missing_ok=True)
        if self._lock is not None:  # last: another serve may take the folder now
            self._lock.close()
            self._lock = None

    # ---- the loop --------------------------------------------------------------------------------------------
    def _tick(self) -> None:
        self._watch_control()
        self._watch_nginx()
        if self.nginx is not None and self.nginx.retiring:
            self.nginx.retire_idle()  # old workers of a reload the switch did not wait for (a restart's)
        now = time.monotonic()
        for role in self.roles.values():
            if self.gave_up is not None:
                return
            if role.engine is None:
                if now >= role.next_start and self._memory_ready(role, now):
                    self._start(role)
            elif not role.engine.alive():
                self._on_death(role)
            elif role.attempt and now - role.ready_at >= self.options.stable_after_s:
                role.attempt = 0

    def _drain_queue(self, timeout_s: float) -> None:
        try:
            item = self.queue.get(timeout=timeout_s)
        except queue.Empty:
            return
        if isinstance(item, Hung):
            role = self.roles[item.role]
            if role.engine is item.engine:
                self._on_hung(role, item)
        else:
            try:
                item.result = self._switch(item)
            finally:
                item.done.set()

    def emit(self, kind: str, **fields: Any) -> None:
        if self.events:
            self.events.emit(kind, **fields)

    # ---- switching -------------------------------------------------------------------------------------------
    def switch_plan(self, cfg: EngineConfig, max_unavailable_s: float) -> SwitchPlan:
        """The memory plan of a switch of the main role to `cfg` (capacity.py), from what runs now."""
        main = self.roles["main"]
        others = [r.engine for r in self.roles.values() if r is not main and r.engine is not None]
        return plan_switch(
            main.engine,
            others,
            cfg,
            estimate(self.starts, cfg, self.measured_cold),
            self.device,
            drain_s=self.options.drain_s,
            stop_grace_s=self.options.stop_grace_s,
            startup_timeout_s=self.options.startup_timeout().value,
            max_unavailable_s=max_unavailable_s,
        )

    def _switch(self, request: SwitchRequest) -> dict[str, Any]:
        """A switch request: its plan; then (unless `check`) the procedure the plan chose, or the refusal."""
        role = self.roles["main"]
        self.redactor.add(request.cfg)
        plan = self.switch_plan(request.cfg, request.max_unavailable_s)
        answer = {"plan": plan.model_dump(mode="json"), "lines": plan.lines(), "proceeds": plan.proceeds}
        if request.check:
            self.emit("switch_checked", role=role.name, decision=plan.decision, reason=plan.reason, fixes=plan.fixes)
            return {"ok": True, "check": True, **answer}
        if not plan.proceeds:
            self.metrics.switches.labels(result="refused").inc()
            self.emit("switch_refused", role=role.name, reason=plan.reason, fixes=plan.fixes, plan=answer["plan"])
            return {"ok": False, "refused": True, "reason": plan.reason, "nothing_changed": True, **answer}
        if plan.decision == "drain_and_replace":
            return {**drain_and_replace(self, role, request.cfg, plan), **answer}
        return {**blue_green(self, role, request.cfg, plan), **answer}

    def set_state(self, role: Role, state: str, **fields: Any) -> None:
        """A role's state, told in the event log and the metrics."""
        self._set_state(role, state, **fields)

    def wait_for_memory(self, role: Role, cfg: EngineConfig) -> dict[str, Any]:
        """Blocks until a start of `cfg` fits beside the other roles' engines (or the startup timeout passed, or a
        stop was asked): what a drain-and-replace does between blue's stop and green's start. Returns the gate's
        last word and the seconds waited."""
        t0 = time.monotonic()
        while True:
            verdict = self._gate(role, cfg)
            waited = time.monotonic() - t0
            if verdict.decision != "wait" or waited >= self.options.startup_timeout().value or self._stop_signal:
                if waited >= MEMORY_POLL_S:
                    self.emit("memory_free", role=role.name, waited_s=round(waited, 3), decision=verdict.decision)
                return {"memory_wait_s": round(waited, 3), "memory": verdict.decision}
            time.sleep(MEMORY_POLL_S)

    def _gate(self, role: Role, cfg: EngineConfig) -> Any:
        others = [r.engine for r in self.roles.values() if r is not role and r.engine is not None]
        return plan_start(cfg, others, self.device)

    def _set_state(self, role: Role, state: str, **fields: Any) -> None:
        if role.state != state:
            self.emit("state", role=role.name, state=state, previous=role.state, **fields)
        role.state = state
        self.metrics.set_state(role.name, state)

    def _upstreams(self) -> dict[str, str | None]:
        ups: dict[str, str | None] = {}
        for name, role in self.roles.items():
            ready = role.engine is not None and role.state == "ready"
            ups[name] = role.engine.base_url.removeprefix("http://") if ready and role.engine else None
        return ups

    def apply_proxy(self) -> set[int]:
        """Points nginx at the ready engines (and the fast 503 for the rest); returns the old workers. A dead
        nginx is restarted with this config instead (it then has no old workers)."""
        assert self.nginx is not None
        self._resize_proxy()
        if self.nginx.alive():
            try:
                return self.nginx.apply(self._upstreams())
            except NginxGone:
                pass
        self._watch_nginx()
        return set()

    # ---- the supervisor's own parts --------------------------------------------------------------------------
    def _watch_nginx(self) -> None:
        """A dead nginx is told (`nginx_died`), its leftover workers stopped, and it is started again with the
        current upstreams, after the engines' backoff while starts fail (`nginx_restart_failed`: the port taken
        by another program, say); `/readyz` answers 503 until it listens again (`nginx_restarted`)."""
        nginx = self.nginx
        if nginx is None or (self._proxy_down_since is None and nginx.alive()):
            return
        now = time.monotonic()
        if self._proxy_down_since is None:
            self._proxy_down_since, self._proxy_attempt, self._proxy_next_start = now, 0, now
            self.metrics.proxy_up.set(0)
            group = nginx.group
            code = group.poll() if group else None
            report = nginx.stop()  # an outside kill of the master alone leaves workers holding the port
            cause = _exit_cause(code)
            self.metrics.proxy_restarts.labels(cause=cause).inc()
            self.emit(
                "nginx_died",
                pid=group.pid if group else None,
                cause=cause,
                exit_code=code,
                excerpt=_tail(nginx.prefix / "error.log"),
                log=str(nginx.prefix / "error.log"),
                leftovers_killed=bool(report and report.sent_sigterm),
            )
        if now < self._proxy_next_start:
            return
        self._resize_proxy()
        try:
            nginx.start(self._upstreams())
        except ServetuneError as err:
            self._proxy_attempt += 1
            delay = self._backoff(self._proxy_attempt)
            self._proxy_next_start = time.monotonic() + delay
            self.emit("nginx_restart_failed", attempt=self._proxy_attempt, reason=err.problem, delay_s=delay)
            if self._proxy_attempt >= self.options.give_up_starts:
                self._give_up(
                    "nginx",
                    f"nginx did not start again {self._proxy_attempt} times in a row: {err.problem}",
                    cause="nginx_restart_failed",
                    log=str(nginx.prefix / "error.log"),
                )
            return
        down_s = round(time.monotonic() - self._proxy_down_since, 3)
        self._proxy_down_since = None
        self.metrics.proxy_up.set(1)
        self.emit(
            "nginx_restarted",
            nginx_pid=nginx.group.pid if nginx.group else None,
            down_s=down_s,
            attempts=self._proxy_attempt + 1,
            proxy_url=nginx.url,
        )

    def _watch_control(self) -> None:
        """A control server whose thread ended (an error inside it) is started again on the same port, so
        serve.json's URL and the token stay true."""
        control = self.control
        if control is None or control.alive():
            return
        control.close()
        port = int(control.url.rpartition(":")[2])
        try:
            self.control = ControlServer(self, port, control.token)
        except OSError as err:
            self.emit("control_restart_failed", url=control.url, reason=str(err))
            return
        self.control.start()
        self.emit("control_restarted", url=self.control.url)

    def _resize_proxy(self) -> None:
        """Body size and long-prompt threshold from the running engines, unless the options fixed them."""
        assert self.nginx is not None
        main = self.roles["main"].engine
        update: dict[str, Any] = {}
        if self.options.sizing.body_bytes is None and main is not None and main.facts.max_model_len:
            from servetune.operate.sizing import body_bytes

            longest = max((r.engine.facts.max_model_len or 0 for r in self.roles.values() if r.engine), default=0)
            update["body_bytes"] = body_bytes(Sized(value=longest, source="served max_model_len (engine facts)"))
        if self.options.long_prompt_tokens and self._bytes_per_token:
            update["long_prompt_bytes"] = long_prompt_bytes(self.options.long_prompt_tokens, self._bytes_per_token)
        if update:
            self.nginx.settings = self.nginx.settings.model_copy(update=update)

    # ---- starting --------------------------------------------------------------------------------------------
    def _memory_ready(self, role: Role, now: float) -> bool:
        """Whether a role's next start may go ahead: always its first; a restart or a fallback start once the
        device has room for it (capacity.py), after waiting at most the startup timeout for memory serve's engines
        do not hold (a killed engine's, released late by the GPU driver). A start that cannot fit at all fails
        here, as a failure no restart cures (`does_not_fit`: the fallback, or giving up)."""
        if role.launches == 0 and not role.on_fallback:
            return True
        verdict = self._gate(role, role.cfg)
        if verdict.decision == "wait":
            if role.memory_wait_since is None:
                role.memory_wait_since = now
                self.emit(
                    "waiting_for_memory",
                    role=role.name,
                    reason=verdict.reason,
                    need_bytes=verdict.need.bytes if verdict.need else None,
                    free_bytes=verdict.room_bytes,
                    up_to_s=self.options.startup_timeout().value,
                )
            if now - role.memory_wait_since < self.options.startup_timeout().value:
                role.next_start = now + MEMORY_POLL_S
                return False
        if role.memory_wait_since is not None:
            self.emit("memory_free", role=role.name, waited_s=round(now - role.memory_wait_since, 3))
            role.memory_wait_since = None
        if verdict.decision == "refuse":
            role.launches += 1
            role.failed_starts += 1
            info = {"cause": "does_not_fit", "excerpt": verdict.reason, "hint": DOES_NOT_FIT_HINT, "log": None}
            self.emit("start_failed", role=role.name, failed_starts=role.failed_starts, **info)
            self._after_failure(role, "does_not_fit", info)
            return False
        return True

    def start_engine(self, role: Role, cfg: EngineConfig) -> tuple[RunningEngine | None, dict[str, Any]]:
        """Launch + acceptance of `cfg` for `role` (not yet behind the proxy); the engine, or None and why."""
        self.emit("starting", role=role.name, config=cfg.public(), fallback=role.on_fallback)
        role.launches += 1
        self._in_launch = True
        t0 = time.monotonic()
        try:
            engine = launch(
                cfg,
                log_dir=self.run_dir / "logs",
                startup_timeout_s=self.options.startup_timeout().value,
            )
            self._pending = engine
            verdict = accept(
                engine,
                long_tokens=self.options.accept_long_tokens,
                api_key=cfg.api_key,
                timeout_s=self.options.startup_timeout().value,
            )
        except EngineLaunchError as err:
            return None, {
                "cause": err.failure.klass,
                "excerpt": err.failure.excerpt,
                "hint": err.failure.hint,
                "log": err.log_path,
            }
        finally:
            self._in_launch = False
        self.metrics.probe.labels(role=role.name, probe="acceptance", result="ok" if verdict.ok else "fail").observe(
            verdict.seconds
        )
        if not verdict.ok:
            engine.stop(grace_s=self.options.stop_grace_s)
            self._pending = None
            return None, {"cause": "acceptance_failed", "excerpt": verdict.detail, "log": str(engine.log_path)}
        self._pending = None
        seconds = time.monotonic() - t0
        start = record(role.name, cfg, _facts_now(engine), seconds)
        self.starts.append(start)
        return engine, {
            "startup_s": round(seconds, 3),
            "acceptance_s": verdict.seconds,
            "acceptance": verdict.detail,
            "compile_cache": start.compile_cache,
            "start": start.model_dump(mode="json"),
        }

    def _start(self, role: Role) -> None:
        self._set_state(role, "starting")
        engine, info = self.start_engine(role, role.cfg)
        if engine is None:
            role.failed_starts += 1
            self.emit("start_failed", role=role.name, failed_starts=role.failed_starts, **info)
            self._after_failure(role, str(info["cause"]), info)
            return
        self.put_behind_proxy(role, engine, info)

    def put_behind_proxy(self, role: Role, engine: RunningEngine, info: dict[str, Any]) -> set[int]:
        """Makes `engine` the role's engine: nginx reload, liveness, metrics, event. Returns nginx's old workers."""
        role.engine = engine
        role.ready_at = time.monotonic()
        role.state = "ready"
        role.failed_starts = 0
        if role.name == "long" or (self.options.long_prompt_tokens and self._bytes_per_token is None):
            measured = bytes_per_token(engine, role.cfg.api_key)
            if measured:
                self._bytes_per_token = Sized(value=measured, source=f"measured with {engine.model_name}'s tokenizer")
        old = self.apply_proxy()
        self.metrics.set_state(role.name, "ready")
        self.metrics.started(role.name)
        facts = _facts_now(engine)
        capacity = capacity_of_facts(facts, engine.cfg)
        self.emit(
            "state",
            role=role.name,
            state="ready",
            pid=engine.pid,
            url=engine.base_url,
            facts=facts.model_dump(exclude_none=True),
            capacity=capacity.model_dump(exclude_none=True),
            **info,
        )
        if not role.on_fallback:
            role.primary_capacity = capacity
        elif role.primary_capacity is not None:
            self.emit(
                "fallback_ready",
                role=role.name,
                gives_up=gives_up(role.primary_capacity, capacity),
                measured_before=role.primary_capacity.model_dump(exclude_none=True),
                measured_after=capacity.model_dump(exclude_none=True),
            )
            role.primary_capacity = None
        self._start_liveness(role)
        return old

    # ---- liveness --------------------------------------------------------------------------------------------
    def _start_liveness(self, role: Role) -> None:
        engine = role.engine
        assert engine is not None
        o = self.options

        def on_result(outcome: ProbeOutcome, misses: int) -> None:
            self.metrics.probe.labels(role=role.name, probe="liveness", result="ok" if outcome.ok else "fail").observe(
                outcome.seconds
            )
            if not outcome.ok:
                self.emit(
                    "probe_failed",
                    role=role.name,
                    probe="liveness",
                    pid=engine.pid,
                    detail=outcome.detail,
                    seconds=round(outcome.seconds, 3),
                    misses=misses,
                    of=o.liveness_failures,
                )

        def on_hung(outcome: ProbeOutcome, since_ok_s: float) -> None:
            self.queue.put(Hung(role.name, engine, outcome, since_ok_s))

        role.liveness = Liveness(
            engine.base_url,
            engine.model_name,
            period_s=o.liveness_period_s,
            deadline_s=o.liveness_deadline().value,
            failures=o.liveness_failures,
            api_key=role.cfg.api_key,
            on_result=on_result,
            on_hung=on_hung,
        )
        role.liveness.start()

    def stop_liveness(self, role: Role) -> None:
        if role.liveness is not None:
            role.liveness.stop()
            role.liveness = None

    # ---- failures --------------------------------------------------------------------------------------------
    def _take_down(self, role: Role) -> None:
        """The role's pool to the fast 503 at once (before the dead or hung engine is cleaned up)."""
        self.stop_liveness(role)
        self._set_state(role, "down")
        self.apply_proxy()

    def _on_death(self, role: Role) -> None:
        engine = role.engine
        assert engine is not None
        info = engine.classify_death()
        self._take_down(role)
        report = engine.stop(grace_s=self.options.stop_grace_s)  # the group's other members (workers) too
        role.engine = None
        excerpt = info.excerpt if info else ""
        specific = classify_log(excerpt, engine.adapter.failure_patterns()) if engine.adapter else None
        code = info.exit_code if info else None
        cause = specific.klass if specific is not None else _exit_cause(code)
        self.emit(
            "died",
            role=role.name,
            pid=engine.pid,
            cause=cause,
            exit_code=code,
            hint=specific.hint if specific else (info.hint if info else None),
            excerpt=excerpt,
            log=str(engine.log_path),
            up_s=round(time.monotonic() - role.ready_at, 3),
            leftovers_killed=bool(report and report.sent_sigterm),
        )
        self._after_failure(role, cause)

    def _on_hung(self, role: Role, hung: Hung) -> None:
        engine = hung.engine
        self._take_down(role)
        self.emit(
            "hung",
            role=role.name,
            pid=engine.pid,
            cause="hung",
            deadline_s=self.options.liveness_deadline().value,
            probe=hung.outcome.detail,
            since_last_ok_s=round(hung.since_ok_s, 3),
            states=sorted({m.state for m in living(_members(engine))}),
        )
        engine.stop(grace_s=min(2.0, self.options.stop_grace_s))  # SIGTERM waits in a stopped process: SIGKILL
        role.engine = None
        self._after_failure(role, "hung")

    def _after_failure(self, role: Role, cause: str, start: dict[str, Any] | None = None) -> None:
        """After a failed start (`start`: what start_failed said), a death or a hang: the fallback, a restart
        after the backoff, or giving up."""
        now = time.monotonic()
        self.metrics.restarted(role.name, cause)
        role.deaths.append(now)
        while role.deaths and now - role.deaths[0] > self.options.crash_loop_window_s:
            role.deaths.popleft()
        o = self.options
        incurable = start is not None and (cause in RESTART_CANNOT_CURE or cause == "does_not_fit")
        starts_fail = role.failed_starts >= o.give_up_starts
        if starts_fail:
            why = f"{role.failed_starts} failed starts in a row"
        elif incurable:
            why = f"{cause}: a restart of the same config cannot cure it"
        else:
            why = f"{len(role.deaths)} failures within {o.crash_loop_window_s:g} s"
        if role.fallback is not None and not role.on_fallback:
            if len(role.deaths) >= o.crash_loop_failures or starts_fail or incurable:
                self._to_fallback(role, role.fallback, why, now)
                return
        elif starts_fail or incurable:
            config = "its fallback config" if role.on_fallback else "its config"
            reason = (
                f"{role.name} gave up after {role.failed_starts} failed starts in a row of {config} (the last: {cause})"
                if starts_fail
                else f"{role.name} gave up: {config} failed to start with {cause}, which a restart cannot cure"
            )
            self._give_up(
                role.name,
                reason,
                cause=cause,
                excerpt=(start or {}).get("excerpt"),
                hint=(start or {}).get("hint"),
                log=(start or {}).get("log"),
            )
            return
        role.attempt += 1
        delay = self._backoff(role.attempt)
        role.next_start = now + delay
        self._set_state(role, "backoff", delay_s=delay, attempt=role.attempt, cause=cause)

    def _to_fallback(self, role: Role, fallback: Fallback, why: str, now: float) -> None:
        self.emit(
            "fallback",
            role=role.name,
            why=why,
            failures=len(role.deaths),
            window_s=self.options.crash_loop_window_s,
            how=fallback.how,
            gives_up=fallback.gives_up() if fallback.before else "measured once the fallback runs",
            planned_before=fallback.before.model_dump(exclude_none=True) if fallback.before else None,
            planned_after=fallback.after.model_dump(exclude_none=True) if fallback.after else None,
            config=fallback.cfg.public(),
        )
        role.cfg, role.on_fallback = fallback.cfg, True
        self.redactor.add(role.cfg)
        self.metrics.fallback.labels(role=role.name).set(1)
        role.deaths.clear()
        role.attempt, role.failed_starts, role.next_start = 0, 0, now
        self._set_state(role, "backoff", delay_s=0.0, attempt=0)

    def _give_up(self, part: str, reason: str, **fields: Any) -> None:
        """Stops serve on its own (exit 1): a part that cannot start is told, not retried forever."""
        self.gave_up = reason
        self.emit("gave_up", part=part, reason=reason, exit_code=1, **fields)

    def _backoff(self, attempt: int) -> float:
        """The delay before the `attempt`-th restart in a row: doubling from the base, at most the maximum."""
        o = self.options
        return min(o.backoff_max_s, o.backoff_base_s * 2.0 ** min(attempt - 1, 64))

    def metrics_text(self) -> bytes:
        return self.metrics.render()

    def ready(self) -> bool:
        """The main role has a ready engine and nginx runs in front of it (what /readyz answers)."""
        return self.roles["main"].state == "ready" and self._proxy_down_since is None

    def status(self) -> dict[str, Any]:
        """What `GET /status` answers (redacted)."""
        return self.redactor.data(
            {
                "proxy_url": self.nginx.url if self.nginx else None,
                "proxy_up": self._proxy_down_since is None,
                "roles": {
                    name: {
                        "state": r.state,
                        "fallback": r.on_fallback,
                        "pid": r.engine.pid if r.engine else None,
                        "url": r.engine.base_url if r.engine else None,
                        "config": r.cfg.public(),
                        "recent_failures": len(r.deaths),
                        "starts": [s.model_dump(mode="json") for s in self.starts if s.role == name][-STATUS_STARTS:],
                    }
                    for name, r in self.roles.items()
                },
            }
        )


def _exit_cause(code: int | None) -> str:
    """`killed_by_SIGKILL` for a signal, else `exit_code_N`: the cause of a death the log does not explain."""
    if code is not None and code < 0:
        try:
            return f"killed_by_{signal.Signals(-code).name}"
        except ValueError:
            return f"killed_by_signal_{-code}"
    return f"exit_code_{code}"


def _tail(path: Path, lines: int = 5) -> str:
    """The last lines of a log (nginx's error.log: why it stopped, when it said so)."""
    try:
        return "\n".join(path.read_text(errors="replace").rstrip().splitlines()[-lines:])
    except OSError:
        return ""


def _facts_now(engine: RunningEngine) -> EngineFacts:
    """The startup facts re-read from the whole log: some lines (llama.cpp's slot setup) can land just after
    the server first answered, so the facts taken at readiness may miss them; after the acceptance probe they
    are all there."""
    if engine.adapter is None or engine.log_path is None:
        return engine.facts
    fresh = engine.adapter.parse_log(read_text(engine.log_path))
    return engine.facts.model_copy(update={k: v for k, v in fresh.model_dump().items() if v is not None})


def _members(engine: RunningEngine) -> list[Any]:
    from servetune.process.proctable import group_members

    return group_members(engine.group.pgid) if engine.group else []
