"""Blue-green switch: a new config takes the traffic with no request lost, or nothing changes.

1. green starts on a free port and passes the acceptance probe (blue keeps serving meanwhile);
2. nginx reloads: new requests go to green; nginx's old workers keep the in-flight ones on blue;
3. once the old workers have exited, every request blue had is answered; blue stops.
If green fails to start or its checks, it is stopped, the proxy is untouched, and the reason is returned.
`request_switch` is the client side (`servetune serve --switch NEW`): it finds the running supervisor from
its run folder and waits for the outcome.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servetune.control.client import ControlClient, ControlError, ControlTimeouts, run_sync
from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.operate.secrets import public_config

if TYPE_CHECKING:
    from servetune.operate.supervisor import Role, Supervisor


def blue_green(sup: Supervisor, role: Role, cfg: EngineConfig) -> dict[str, Any]:
    """Runs the switch in the supervisor's main thread; returns its outcome (ok, reason, timings)."""
    sup.redactor.add(cfg)
    t0 = time.monotonic()
    blue = role.engine
    sup.emit("switch_started", role=role.name, config=public_config(cfg), blue_pid=blue.pid if blue else None)
    green, info = sup.start_engine(role, cfg)
    if green is None:
        reason = f"{info['cause']}: {info.get('hint') or info.get('excerpt', '')}".strip()
        sup.metrics.switches.labels(result="failed").inc()
        sup.emit("switch_failed", role=role.name, reason=reason, **info)
        return {"ok": False, "reason": reason, "nothing_changed": True, **info}
    started_s = time.monotonic() - t0
    if blue is not None:
        sup._stop_liveness(role)
    t1 = time.monotonic()
    old_workers = sup.put_behind_proxy(role, green, info)
    reload_s = time.monotonic() - t1
    assert sup.nginx is not None
    drained = sup.nginx.wait_gone(old_workers, sup.options.drain_s + 1.0)
    drain_s = time.monotonic() - t1
    teardown = blue.stop(grace_s=sup.options.stop_grace_s) if blue is not None else None
    role.cfg, role.on_fallback = cfg, False
    role.deaths.clear()
    role.attempt = 0
    result = {
        "ok": True,
        "green_url": green.base_url,
        "green_pid": green.pid,
        "blue_pid": blue.pid if blue else None,
        "start_s": round(started_s, 3),
        "reload_s": round(reload_s, 4),
        "drain_s": round(drain_s, 3),
        "drained": drained,
        "total_s": round(time.monotonic() - t0, 3),
        "blue_clean": teardown.clean if teardown else None,
    }
    sup.metrics.switches.labels(result="ok").inc()
    sup.emit("switch_done", role=role.name, **result)
    return result


def request_switch(run_dir: Path, cfg: EngineConfig, timeout_s: float) -> dict[str, Any]:
    """Asks the `servetune serve` running in `run_dir` to switch to `cfg`; the outcome, or a ServetuneError."""
    from servetune.operate.supervisor import STATE_FILE, TOKEN_FILE

    try:
        state = json.loads((run_dir / STATE_FILE).read_text())
        token = (run_dir / TOKEN_FILE).read_text().strip()
    except (OSError, ValueError) as err:
        raise ServetuneError(
            f"no running `servetune serve` in {run_dir} ({err})", "pass the --run-dir of the running serve"
        ) from err
    client = ControlClient(state["control_url"], api_key=token, timeouts=ControlTimeouts(total_s=timeout_s))
    try:
        status, answer = run_sync(client.post_json("/switch", {"config": cfg.model_dump(mode="json")}))
    except ControlError as err:
        raise ServetuneError(
            f"cannot reach the running serve at {state['control_url']}: {err.problem}",
            "is `servetune serve` still running?",
        ) from None
    if status != 200:
        reason = answer.get("reason") if isinstance(answer, dict) else None
        raise ServetuneError(
            f"the switch failed, nothing changed: {reason or f'HTTP {status}'}",
            "fix the new config (its log is named in the event log) and switch again",
        )
    return dict(answer) if isinstance(answer, dict) else {}
