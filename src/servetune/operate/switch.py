"""The two switch procedures a switch's memory plan (capacity.py) chooses between.

Blue-green (green fits beside blue): a new config takes the traffic with no request lost, or nothing changes.
1. green starts on a free port and passes the acceptance probe (blue keeps serving meanwhile);
2. nginx reloads: new requests go to green; nginx's old workers keep the in-flight ones on blue;
3. once the old workers have exited, every request blue had is answered; blue stops.
If green fails to start or its checks, it is stopped, the proxy is untouched, and the reason is returned.

Drain-and-replace (green fits only once blue is gone, and the user allowed the outage):
1. nginx reloads with the main pool down: new requests get the fast 503 with Retry-After, blue finishes its
   in-flight streams (up to the drain deadline), then stops;
2. green starts once the device has room for it (a stopped engine's memory may be released late);
3. green passes the acceptance probe and nginx sends it the traffic. The time from 1 to 3 is the unavailability,
   returned beside the plan's expectation and bound. If green fails, blue's config is started again.

The procedures see the supervisor only through `SwitchHost` (no import of the supervisor).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from servetune.engines.config import EngineConfig
from servetune.engines.launch import RunningEngine
from servetune.operate.capacity import SwitchPlan
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

    def apply_proxy(self) -> set[int]: ...

    def set_state(self, role: Role, state: str, **fields: Any) -> None: ...

    def wait_for_memory(self, role: Role, cfg: EngineConfig) -> dict[str, Any]: ...


def _started(sup: SwitchHost, role: Role, cfg: EngineConfig, plan: SwitchPlan) -> RunningEngine | None:
    blue = role.engine
    sup.emit(
        "switch_started",
        role=role.name,
        config=cfg.public(),
        blue_pid=blue.pid if blue else None,
        decision=plan.decision,
        reason=plan.reason,
        expected_unavailable_s=plan.unavailable_s,
        unavailable_bound_s=plan.unavailable_bound_s,
        green_need_bytes=plan.green.bytes if plan.green else None,
        green_kv_tokens=plan.green.kv_tokens if plan.green else None,
    )
    return blue


def _failed(sup: SwitchHost, role: Role, info: dict[str, Any], **more: Any) -> dict[str, Any]:
    reason = f"{info['cause']}: {info.get('hint') or info.get('excerpt', '')}".strip()
    sup.metrics.switches.labels(result="failed").inc()
    sup.emit("switch_failed", role=role.name, reason=reason, **info, **more)
    return {"ok": False, "reason": reason, **info, **more}


def blue_green(sup: SwitchHost, role: Role, cfg: EngineConfig, plan: SwitchPlan) -> dict[str, Any]:
    """Runs the side-by-side switch in the supervisor's main thread; returns its outcome (ok, reason, timings)."""
    sup.redactor.add(cfg)
    t0 = time.monotonic()
    blue = _started(sup, role, cfg, plan)
    green, info = sup.start_engine(role, cfg)
    if green is None:
        return _failed(sup, role, info, nothing_changed=True)
    started_s = time.monotonic() - t0
    if blue is not None:
        sup.stop_liveness(role)
    t1 = time.monotonic()
    old_workers = sup.put_behind_proxy(role, green, info)
    reload_s = time.monotonic() - t1
    assert sup.nginx is not None
    drained = sup.nginx.drain_workers(old_workers, since=t1)
    drain_s = time.monotonic() - t1
    teardown = blue.stop(grace_s=sup.options.stop_grace_s) if blue is not None else None
    role.adopt(cfg)
    result = {
        "ok": True,
        "decision": plan.decision,
        "green_url": green.base_url,
        "green_pid": green.pid,
        "blue_pid": blue.pid if blue else None,
        "start_s": round(started_s, 3),
        "compile_cache": info.get("compile_cache"),
        "reload_s": round(reload_s, 4),
        "drain_s": round(drain_s, 3),
        "drained": drained,
        "total_s": round(time.monotonic() - t0, 3),
        "blue_clean": teardown.clean if teardown else None,
    }
    sup.metrics.switches.labels(result="ok").inc()
    sup.emit("switch_done", role=role.name, **result)
    return result


def drain_and_replace(sup: SwitchHost, role: Role, cfg: EngineConfig, plan: SwitchPlan) -> dict[str, Any]:
    """Runs the drain-and-replace switch in the supervisor's main thread; returns its outcome with the measured
    unavailability."""
    sup.redactor.add(cfg)
    t0 = time.monotonic()
    blue = _started(sup, role, cfg, plan)
    blue_cfg = role.cfg
    sup.stop_liveness(role)
    role.engine = None
    sup.set_state(role, "down", reason="switch: drain and replace")
    down_at = time.monotonic()
    old_workers = sup.apply_proxy()  # the main pool answers the fast 503 from now on
    assert sup.nginx is not None
    drained = sup.nginx.drain_workers(old_workers, since=down_at)
    drain_s = time.monotonic() - down_at
    teardown = blue.stop(grace_s=sup.options.stop_grace_s) if blue is not None else None
    stop_s = time.monotonic() - down_at - drain_s
    memory = sup.wait_for_memory(role, cfg)
    t_start = time.monotonic()
    green, info = sup.start_engine(role, cfg)
    if green is None:
        back, back_info = sup.start_engine(role, blue_cfg)
        if back is not None:
            sup.put_behind_proxy(role, back, back_info)
        else:
            sup.set_state(role, "backoff", delay_s=0.0, attempt=0, cause=str(back_info.get("cause")))
        return _failed(
            sup,
            role,
            info,
            nothing_changed=False,
            blue_restarted=back is not None,
            unavailable_s=round(time.monotonic() - down_at, 3),
        )
    started_s = time.monotonic() - t_start
    role.adopt(cfg)
    sup.put_behind_proxy(role, green, info)
    unavailable_s = time.monotonic() - down_at
    result = {
        "ok": True,
        "decision": plan.decision,
        "green_url": green.base_url,
        "green_pid": green.pid,
        "blue_pid": blue.pid if blue else None,
        "drain_s": round(drain_s, 3),
        "drained": drained,
        "stop_s": round(stop_s, 3),
        **memory,
        "start_s": round(started_s, 3),
        "compile_cache": info.get("compile_cache"),
        "unavailable_s": round(unavailable_s, 3),
        "expected_s": plan.unavailable_s,
        "bound_s": plan.unavailable_bound_s,
        "within_bound": plan.unavailable_bound_s is None or unavailable_s <= plan.unavailable_bound_s,
        "total_s": round(time.monotonic() - t0, 3),
        "blue_clean": teardown.clean if teardown else None,
    }
    sup.metrics.switches.labels(result="ok").inc()
    sup.emit("switch_done", role=role.name, **result)
    return result
