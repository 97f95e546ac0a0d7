"""Blue-green switch: a new config takes the traffic with no request lost, or nothing changes.

1. green starts on a free port and passes the acceptance probe (blue keeps serving meanwhile);
2. nginx reloads: new requests go to green; nginx's old workers keep the in-flight ones on blue;
3. once the old workers have exited, every request blue had is answered; blue stops.
If green fails to start or its checks, it is stopped, the proxy is untouched, and the reason is returned.
The procedure sees the supervisor only through `SwitchHost` (no import of the supervisor).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from servetune.engines.config import EngineConfig
from servetune.engines.launch import RunningEngine
from servetune.operate.metrics import SupervisorMetrics
from servetune.operate.proxy import Nginx
from servetune.operate.role import Role
from servetune.secrets import Redactor


class SwitchOptions(Protocol):
    @property
    def drain_s(self) -> float: ...

    @property
    def stop_grace_s(self) -> float: ...


class SwitchHost(Protocol):
    """What the switch needs of the supervisor."""

    redactor: Redactor
    metrics: SupervisorMetrics
    nginx: Nginx | None

    @property
    def options(self) -> SwitchOptions: ...

    def emit(self, kind: str, **fields: Any) -> None: ...

    def start_engine(self, role: Role, cfg: EngineConfig) -> tuple[RunningEngine | None, dict[str, Any]]: ...

    def stop_liveness(self, role: Role) -> None: ...

    def put_behind_proxy(self, role: Role, engine: RunningEngine, info: dict[str, Any]) -> set[int]: ...


def blue_green(sup: SwitchHost, role: Role, cfg: EngineConfig) -> dict[str, Any]:
    """Runs the switch in the supervisor's main thread; returns its outcome (ok, reason, timings)."""
    sup.redactor.add(cfg)
    t0 = time.monotonic()
    blue = role.engine
    sup.emit("switch_started", role=role.name, config=cfg.public(), blue_pid=blue.pid if blue else None)
    green, info = sup.start_engine(role, cfg)
    if green is None:
        reason = f"{info['cause']}: {info.get('hint') or info.get('excerpt', '')}".strip()
        sup.metrics.switches.labels(result="failed").inc()
        sup.emit("switch_failed", role=role.name, reason=reason, **info)
        return {"ok": False, "reason": reason, "nothing_changed": True, **info}
    started_s = time.monotonic() - t0
    if blue is not None:
        sup.stop_liveness(role)
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
