"""Prometheus alert rules, scrape config and a Grafana dashboard, from the SLOs and the measured capacity.

Thresholds are not guesses: p99 TTFT/TPOT bounds are the experiment's SLOs (or, without one, twice what the
tuned config measured under load); the KV-cache alert fires when less than one max-length request of room is
left (1 - 1/max_concurrency, from the engine's capacity); the queue alert when more requests wait than fit at
once.  Every rule carries its number's source in `annotations.source`, and the file header lists them.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from servetune.operate import metrics as m
from servetune.operate.evidence import Sized

KV_USAGE_BOUNDS = (0.5, 0.98)
NO_SLO_FACTOR = 2.0
"""Without an SLO, latency alerts fire at this x the p99 measured under the tuned load."""
PERCENTILE_WINDOW = "5m"
LIVENESS = '{probe="liveness"}'


class AlertInputs(BaseModel):
    """What the rules are sized from."""

    model_config = ConfigDict(frozen=True)

    name: str
    engine: str
    ttft_p99_s: Sized | None = None
    tpot_p99_s: Sized | None = None
    max_concurrency: Sized | None = None
    crash_loop_failures: int = 3
    crash_loop_window_s: float = 300
    supervised: bool = True
    """True when `servetune serve` runs the engine (its own series exist)."""


def latency_bound(slo_ms: float | None, measured: Sized | None, what: str) -> Sized | None:
    """An SLO in ms → seconds; else NO_SLO_FACTOR x the measured p99; None when neither is known."""
    if slo_ms is not None:
        return Sized(value=slo_ms / 1000, source=f"the experiment's SLO {what} ≤ {slo_ms:g} ms")
    if measured is not None:
        return Sized(
            value=round(measured.value * NO_SLO_FACTOR, 6),
            source=f"no SLO: {NO_SLO_FACTOR:g} x the measured p99, {measured.value * 1000:.3g} ms ({measured.source})",
        )
    return None


def kv_usage_threshold(max_concurrency: Sized | None) -> Sized:
    if max_concurrency is None or max_concurrency.value <= 1:
        return Sized(value=0.9, source="capacity unknown (or ≤ 1 request): servetune's default 0.9")
    value = min(max(1 - 1 / max_concurrency.value, KV_USAGE_BOUNDS[0]), KV_USAGE_BOUNDS[1])
    return Sized(
        value=round(value, 3),
        source=f"less than one max-length request of room: 1 - 1/{max_concurrency.value:.3g} "
        f"({max_concurrency.source}), within {KV_USAGE_BOUNDS}",
    )


def waiting_threshold(max_concurrency: Sized | None) -> Sized:
    if max_concurrency is None:
        return Sized(value=8, source="capacity unknown: servetune's default 8")
    return Sized(
        value=max(1, math.floor(max_concurrency.value)),
        source=f"more waiting than fit at once ({max_concurrency.source})",
    )


def _rule(alert: str, expr: str, for_: str, severity: str, summary: str, source: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "source": source},
    }


def engine_job(name: str) -> str:
    return f"{name}-engine"


def supervisor_job(name: str) -> str:
    return f"{name}-servetune"


def rules(inp: AlertInputs) -> tuple[dict[str, Any], list[str]]:
    """The rule file as data, and the header lines that list each number's source."""
    job = engine_job(inp.name)
    sel = f'{{job="{job}"}}'
    out: list[dict[str, Any]] = [
        _rule(
            "EngineDown",
            f"up{sel} == 0",
            "1m",
            "critical",
            "The engine's /metrics does not answer",
            "scrape failure for 1 minute (4 scrapes)",
        )
    ]
    header: list[str] = []
    if inp.engine == "vllm":
        ttft, tpot = inp.ttft_p99_s, inp.tpot_p99_s
        if ttft:
            out.append(
                _rule(
                    "TTFTp99AboveSLO",
                    f"histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{sel}"
                    f"[{PERCENTILE_WINDOW}]))) > {ttft.value:g}",
                    "5m",
                    "warning",
                    f"p99 time to first token above {ttft.value:g} s",
                    ttft.source,
                )
            )
            header.append(f"TTFT p99 bound {ttft.value:g} s: {ttft.source}")
        if tpot:
            out.append(
                _rule(
                    "TPOTp99AboveSLO",
                    "histogram_quantile(0.99, sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket"
                    f"{sel}[{PERCENTILE_WINDOW}]))) > {tpot.value:g}",
                    "5m",
                    "warning",
                    f"p99 time per output token above {tpot.value:g} s",
                    tpot.source,
                )
            )
            header.append(f"TPOT p99 bound {tpot.value:g} s: {tpot.source}")
        kv, wait = kv_usage_threshold(inp.max_concurrency), waiting_threshold(inp.max_concurrency)
        out += [
            _rule(
                "KVCacheNearlyFull",
                f"max(vllm:kv_cache_usage_perc{sel}) > {kv.value:g}",
                "10m",
                "warning",
                f"KV cache usage above {kv.value:g} for 10 minutes: preemptions are next",
                kv.source,
            ),
            _rule(
                "Preempting",
                f"sum(rate(vllm:num_preemptions_total{sel}[5m])) > 0",
                "10m",
                "warning",
                "The engine keeps preempting requests (KV cache oversubscribed)",
                "any sustained preemption: requests are evicted and recomputed",
            ),
            _rule(
                "QueueBacklog",
                f"sum(vllm:num_requests_waiting{sel}) > {wait.int}",
                "5m",
                "warning",
                f"More than {wait.int} requests waiting for 5 minutes",
                wait.source,
            ),
        ]
        header += [f"KV usage bound {kv.value:g}: {kv.source}", f"waiting bound {wait.int}: {wait.source}"]
    else:
        wait = waiting_threshold(inp.max_concurrency)
        out.append(
            _rule(
                "QueueBacklog",
                f"sum(llamacpp:requests_deferred{sel}) > {wait.int}",
                "5m",
                "warning",
                f"More than {wait.int} requests deferred for 5 minutes (all slots busy)",
                wait.source,
            )
        )
        header.append(f"deferred bound {wait.int}: {wait.source}")
    if inp.supervised:
        k, window = inp.crash_loop_failures, inp.crash_loop_window_s
        restarts = f"sum(increase({m.RESTARTS}_total[{int(window)}s]))"
        out += [
            _rule(
                "EngineRestarted",
                f"sum(increase({m.RESTARTS}_total[15m])) > 0",
                "0m",
                "warning",
                "servetune restarted the engine (cause in the label and the event log)",
                "any restart",
            ),
            _rule(
                "EngineCrashLoop",
                f"{restarts} >= {k}",
                "0m",
                "critical",
                f"{k} or more restarts within {window:g} s: servetune switches to the fallback profile",
                f"servetune serve --crash-loop {k} --crash-window {window:g}",
            ),
            _rule(
                "ServingFallbackProfile",
                f"max({m.FALLBACK}) == 1",
                "0m",
                "warning",
                "Serving the smaller fallback profile (capacity given up: see the event log)",
                "fallback active",
            ),
            _rule(
                "NoReadyEngine",
                f'max({m.UP}{{role="main"}}) == 0',
                "2m",
                "critical",
                "No engine ready behind the proxy for 2 minutes (clients get 503)",
                "servetune's own state",
            ),
        ]
    return {"groups": [{"name": f"{inp.name}-servetune", "rules": out}]}, header


def rules_yaml(inp: AlertInputs) -> str:
    data, header = rules(inp)
    lines = ["# Prometheus alert rules written by servetune (servetune.operate.alerts); sources:"]
    lines += [f"#   {h}" for h in header]
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=200)


def scrape_config(
    name: str, engine_targets: list[str], supervisor_targets: list[str], rule_files: list[str], *, interval_s: int = 15
) -> str:
    """prometheus.yml: the engine's /metrics (through the proxy or the engine service) and servetune's own."""
    jobs: list[dict[str, Any]] = [
        {"job_name": engine_job(name), "metrics_path": "/metrics", "static_configs": [{"targets": engine_targets}]}
    ]
    if supervisor_targets:
        jobs.append(
            {
                "job_name": supervisor_job(name),
                "metrics_path": "/metrics",
                "static_configs": [{"targets": supervisor_targets}],
            }
        )
    data = {
        "global": {"scrape_interval": f"{interval_s}s", "evaluation_interval": f"{interval_s}s"},
        "rule_files": rule_files,
        "scrape_configs": jobs,
    }
    head = (
        "# Prometheus scrape config written by servetune: the engine's metrics and servetune's own; "
        f"{interval_s} s interval (vLLM's gauges change per step; histograms are rated over {PERCENTILE_WINDOW}).\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False)


def _panel(i: int, title: str, exprs: list[tuple[str, str]], unit: str, threshold: Sized | None = None) -> dict:
    panel: dict[str, Any] = {
        "id": i,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "targets": [{"refId": chr(65 + j), "expr": e, "legendFormat": legend} for j, (e, legend) in enumerate(exprs)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
    }
    if threshold is not None:
        panel["description"] = f"Red line: {threshold.value:g} ({threshold.source})"
        panel["fieldConfig"]["defaults"]["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": "green", "value": None}, {"color": "red", "value": threshold.value}],
        }
        panel["fieldConfig"]["defaults"]["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return panel


def dashboard(inp: AlertInputs) -> dict[str, Any]:
    """A Grafana dashboard (JSON model) of the series the rules watch, with the thresholds drawn."""
    sel = f'{{job="{engine_job(inp.name)}"}}'
    q = f"[{PERCENTILE_WINDOW}]"
    panels: list[tuple[str, list[tuple[str, str]], str, Sized | None]] = []
    if inp.engine == "vllm":

        def hq(p: float, h: str) -> str:
            return f"histogram_quantile({p:g}, sum by (le) (rate(vllm:{h}_bucket{sel}{q})))"

        panels += [
            (
                "Time to first token",
                [(hq(p, "time_to_first_token_seconds"), f"p{int(p * 100)}") for p in (0.5, 0.99)],
                "s",
                inp.ttft_p99_s,
            ),
            (
                "Time per output token",
                [(hq(p, "request_time_per_output_token_seconds"), f"p{int(p * 100)}") for p in (0.5, 0.99)],
                "s",
                inp.tpot_p99_s,
            ),
            ("KV cache usage", [(f"max(vllm:kv_cache_usage_perc{sel})", "usage")], "percentunit", None),
            (
                "Requests running / waiting",
                [
                    (f"sum(vllm:num_requests_running{sel})", "running"),
                    (f"sum(vllm:num_requests_waiting{sel})", "waiting"),
                ],
                "short",
                None,
            ),
            ("Preemptions", [(f"sum(rate(vllm:num_preemptions_total{sel}{q}))", "per s")], "short", None),
            ("Generated tokens", [(f"sum(rate(vllm:generation_tokens_total{sel}{q}))", "tok/s")], "short", None),
        ]
    else:
        panels += [
            (
                "Requests processing / deferred",
                [
                    (f"sum(llamacpp:requests_processing{sel})", "processing"),
                    (f"sum(llamacpp:requests_deferred{sel})", "deferred"),
                ],
                "short",
                None,
            ),
            ("Generated tokens", [(f"sum(rate(llamacpp:tokens_predicted_total{sel}{q}))", "tok/s")], "short", None),
        ]
    if inp.supervised:
        panels += [
            ("Engine ready (servetune)", [(f"max by (role) ({m.UP})", "{{role}}")], "short", None),
            ("Restarts by cause", [(f"sum by (cause) (increase({m.RESTARTS}_total[1h]))", "{{cause}}")], "short", None),
            (
                "Liveness probe p99",
                [(f"histogram_quantile(0.99, sum by (le) (rate({m.PROBE_SECONDS}_bucket{LIVENESS}{q})))", "p99")],
                "s",
                None,
            ),
            ("Seconds since last restart", [(f"min by (role) ({m.LAST_RESTART})", "{{role}}")], "s", None),
        ]
    kv = kv_usage_threshold(inp.max_concurrency)
    built = [_panel(i, t, e, u, th if t != "KV cache usage" else kv) for i, (t, e, u, th) in enumerate(panels)]
    return {
        "title": f"{inp.name}: servetune",
        "uid": f"servetune-{inp.name}"[:40],
        "description": "Written by servetune; thresholds come from the SLOs and measured capacity (panel notes).",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
        },
        "panels": built,
    }
