"""The supervisor's own Prometheus series, served beside the engine's (`/metrics` of the control server).

Names start with `servetune_`; the alert rules and the Grafana dashboard (alerts.py) use exactly these, so the
names live here once: `STATE`, `RESTARTS`, `PROBE_SECONDS`, `LAST_RESTART`, `SWITCHES`, `UP`, `PROXY_UP`,
`PROXY_RESTARTS`.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

STATES = ("starting", "ready", "down", "backoff", "draining", "stopped")
STATE = "servetune_engine_state"
RESTARTS = "servetune_engine_restarts"
PROBE_SECONDS = "servetune_probe_seconds"
LAST_RESTART = "servetune_seconds_since_last_restart"
SWITCHES = "servetune_switches"
UP = "servetune_engine_up"
FALLBACK = "servetune_fallback_active"
PROXY_UP = "servetune_proxy_up"
PROXY_RESTARTS = "servetune_proxy_restarts"
PROBE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class SupervisorMetrics:
    """One registry per supervisor (tests run several in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.state = Gauge(STATE, "1 for the engine's current state", ["role", "state"], registry=self.registry)
        self.up = Gauge(UP, "1 while the role has a ready engine behind the proxy", ["role"], registry=self.registry)
        self.restarts = Counter(RESTARTS, "Engine restarts by cause", ["role", "cause"], registry=self.registry)
        self.probe = Histogram(
            PROBE_SECONDS,
            "Probe latency (liveness: one generated token; acceptance: the whole check)",
            ["role", "probe", "result"],
            buckets=PROBE_BUCKETS,
            registry=self.registry,
        )
        self.switches = Counter(SWITCHES, "Blue-green switches by result", ["result"], registry=self.registry)
        self.fallback = Gauge(FALLBACK, "1 while the role runs its fallback profile", ["role"], registry=self.registry)
        self.proxy_up = Gauge(PROXY_UP, "1 while servetune's nginx runs before the engines", registry=self.registry)
        self.proxy_restarts = Counter(
            PROXY_RESTARTS, "nginx restarts after it died, by cause", ["cause"], registry=self.registry
        )
        self._last_restart: dict[str, float] = {}
        self._since = Gauge(
            LAST_RESTART, "Seconds since the role's engine last (re)started", ["role"], registry=self.registry
        )

    def set_state(self, role: str, state: str) -> None:
        for name in STATES:
            self.state.labels(role=role, state=name).set(1.0 if name == state else 0.0)
        self.up.labels(role=role).set(1.0 if state == "ready" else 0.0)

    def started(self, role: str) -> None:
        """Marks a (re)start now; the gauge then counts seconds from it at every scrape."""
        self._last_restart[role] = time.monotonic()
        self._since.labels(role=role).set_function(lambda: time.monotonic() - self._last_restart[role])

    def restarted(self, role: str, cause: str) -> None:
        self.restarts.labels(role=role, cause=cause).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
