"""`servetune deploy`: docker compose, Kubernetes and systemd files for a config, sized from measurements.

Inputs come from a tuning folder (its winner and what was measured of it), an engine config file, or a plan
(`servetune plan --json`, the seed systems in examples/plans): then the numbers are the planner's, and say so.
Every file states where each number came from; secrets are never written (`VLLM_API_KEY` and secret-looking
environment variables come from the environment, a Secret or an EnvironmentFile).
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.operate import alerts, proxy
from servetune.operate.commands import engine_args
from servetune.operate.evidence import Evidence
from servetune.operate.secrets import SECRET_FLAGS, is_secret_name
from servetune.operate.sizing import (
    PROBE_PERIOD_S,
    Sized,
    body_bytes,
    liveness_deadline,
    read_timeout,
    startup_budget,
)
from servetune.operate.source import load_source

TARGETS = ("compose", "kubernetes", "systemd")
ENGINE_PORT = 8000
PROXY_PORT = 8000
CONTROL_PORT = 9400
DRAIN_S = 30
SHM = "16g"
"""/dev/shm for vLLM's worker processes (tensor parallel shares tensors through it; Docker's 64 MiB is too small)."""
IMAGES = {"prometheus": "prom/prometheus:v2.53.0", "grafana": "grafana/grafana:11.1.0", "nginx": "nginx:1.27"}
LLAMACPP_IMAGE = "ghcr.io/ggml-org/llama.cpp:server"
DEFAULT_COLD_START = Sized(value=300, source="no cold start measured: servetune's default (measure one with tune)")
API_KEY_ENV = {"vllm": "VLLM_API_KEY", "llamacpp": "LLAMA_API_KEY", "sglang": "SGLANG_API_KEY"}


class DeployInputs(BaseModel):
    """A config and the measured (or planned) numbers its deployment files are sized from."""

    model_config = ConfigDict(frozen=True)

    name: str
    cfg: EngineConfig
    evidence: Evidence
    gpus: int = 1
    cold_start: Sized
    longest_request: Sized
    max_model_len: Sized
    max_concurrency: Sized | None = None
    image: str

    @classmethod
    def from_path(
        cls,
        path: Path,
        *,
        name: str = "servetune",
        gpu: str | None = None,
        gpus: int | None = None,
        cold_start_s: float | None = None,
        cold_start_source: str | None = None,
        slos: dict[str, float] | None = None,
    ) -> DeployInputs:
        if not name.replace("-", "").isalnum() or not name[0].isalpha() or name != name.lower() or len(name) > 40:
            raise ServetuneError(
                f"bad deployment name {name!r}", "use lowercase letters, digits and '-', starting with a letter"
            )
        if path.suffix == ".json" and path.is_file() and "serve_flags" in path.read_text(errors="replace")[:200_000]:
            src_cfg, evidence, planned = _from_plan(path)
        else:
            src = load_source(path, resolve=False)
            src_cfg, evidence, planned = src.cfg, src.evidence, {}
        if cold_start_s is not None:
            if not (math.isfinite(cold_start_s) and cold_start_s > 0):
                raise ServetuneError(f"--cold-start-s must be a positive number, got {cold_start_s}")
            cold = Sized(value=cold_start_s, source=cold_start_source or "--cold-start-s")
        else:
            cold = evidence.cold_start() or DEFAULT_COLD_START
        mml = evidence.max_model_len or _flag_len(src_cfg) or Sized(value=4096, source="no max_model_len known")
        longest = evidence.longest_request or planned.get("longest") or Sized(value=150, source="nothing measured")
        version = src_cfg.version or planned.get("version")
        image = f"vllm/vllm-openai:v{version}" if version else "vllm/vllm-openai:latest"
        if src_cfg.engine == "llamacpp":
            image = LLAMACPP_IMAGE
        return cls(
            name=name,
            cfg=src_cfg,
            evidence=evidence.model_copy(
                update={"gpu": gpu or evidence.gpu, "slos": {**evidence.slos, **(slos or {})}}
            ),
            gpus=gpus or evidence.gpu_count,
            cold_start=cold,
            longest_request=longest,
            max_model_len=mml,
            max_concurrency=evidence.max_concurrency or planned.get("concurrency"),
            image=image,
        )

    # ---- derived numbers (one place) ------------------------------------------------------------------------
    def alert_inputs(self, supervised: bool) -> alerts.AlertInputs:
        slos = self.evidence.slos
        return alerts.AlertInputs(
            name=self.name,
            engine=self.cfg.engine,
            ttft_p99_s=alerts.latency_bound(slos.get("ttft_p99_ms"), self.evidence.p99_ttft, "ttft_p99"),
            tpot_p99_s=alerts.latency_bound(slos.get("tpot_p99_ms"), self.evidence.p99_tpot, "tpot_p99"),
            max_concurrency=self.max_concurrency,
            supervised=supervised,
        )

    def proxy_settings(self, listen: str) -> proxy.ProxySettings:
        return proxy.ProxySettings(
            listen=listen,
            read_timeout=read_timeout(self.longest_request),
            body_bytes=body_bytes(self.max_model_len),
            drain_s=Sized(value=DRAIN_S, source="servetune's default drain deadline"),
            upstream_keepalive=proxy.upstream_keepalive([self.cfg.engine]),
        )

    def startup(self) -> Sized:
        return startup_budget(self.cold_start)

    def liveness(self) -> Sized:
        return liveness_deadline(self.evidence.p99_ttft)

    def sources(self) -> dict[str, str]:
        s = self.proxy_settings("x")
        return {
            "origin": self.evidence.origin,
            "startup budget": f"{self.startup().int} s = {self.startup().source}",
            "liveness deadline": f"{self.liveness().value:g} s = {self.liveness().source}",
            "read timeout": f"{s.read_timeout.int} s = {s.read_timeout.source}",
            "body size": f"{s.body_bytes.int} bytes = {s.body_bytes.source}",
        }


def _flag_len(cfg: EngineConfig) -> Sized | None:
    for key in ("max-model-len", "ctx-size"):
        value = cfg.flags.get(key)
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return Sized(value=int(value), source=f"the config's --{key}")
    return None


def _from_plan(path: Path) -> tuple[EngineConfig, Evidence, dict[str, Any]]:
    """A `servetune plan --json` file: the planned config and the planner's numbers (estimates, said so)."""
    try:
        plan = json.loads(path.read_text())
        flags = dict(plan["serve_flags"])
        speeds = {s["name"]: s for s in plan.get("speeds", [])}
    except (ValueError, KeyError, TypeError) as err:
        raise ServetuneError(f"{path} is not a `servetune plan --json` file: {err}") from err
    where = f"planner estimate in {path.name} (not measured)"
    max_len = int(plan["max_model_len"])
    prefill = next((s for n, s in speeds.items() if n.startswith("prefill") and f"{max_len:,}" in n), None)
    decode = next((s for n, s in speeds.items() if n.startswith("decode, 1 stream") and f"{max_len:,}" in n), None)
    planned: dict[str, Any] = {"version": plan.get("vllm_version")}
    if prefill and decode and decode["expected"] > 0:
        out = 2048
        secs = prefill["expected"] + out / decode["expected"]
        planned["longest"] = Sized(
            value=round(secs, 1),
            source=f"{where}: prefill of {max_len:,} tokens {prefill['expected']:.3g} s + {out} output tokens at "
            f"{decode['expected']:.3g} tok/s",
        )
    planned["concurrency"] = Sized(value=round(plan["max_concurrency"], 2), source=f"{where}: KV cache capacity")
    cfg = EngineConfig(engine="vllm", model=f"/models/{plan['model']}", served_model_name=plan["model"], flags=flags)
    evidence = Evidence(
        origin=f"plan {path.name}",
        max_model_len=Sized(value=max_len, source=f"{where}"),
        gpu=str(plan.get("gpu")),
        gpu_count=int(plan.get("num_gpus") or 1),
    )
    return cfg, evidence, planned


# ---- helpers shared by the targets ------------------------------------------------------------------------------
def _public_flags(cfg: EngineConfig) -> EngineConfig:
    """The config without secrets: api-key flags go (the engine reads its key from the environment)."""
    flags = {k: v for k, v in cfg.flags.items() if k.lstrip("-") not in SECRET_FLAGS}
    return cfg.model_copy(update={"flags": flags})


def _env(cfg: EngineConfig) -> tuple[dict[str, str], list[str]]:
    """(literal env, names that must come from a secret) — secret values are never written."""
    literal = {k: v for k, v in cfg.env.items() if not is_secret_name(k)}
    secret = sorted(k for k in cfg.env if is_secret_name(k))
    if any(k.lstrip("-") in SECRET_FLAGS for k in cfg.flags):
        secret.append(API_KEY_ENV.get(cfg.engine, "VLLM_API_KEY"))
    return literal, secret


def _container_cfg(inp: DeployInputs) -> EngineConfig:
    cfg = _public_flags(inp.cfg)
    if cfg.engine == "llamacpp":
        return cfg.model_copy(update={"model": f"/models/{Path(cfg.model).name}"})
    return cfg


def _program(cfg: EngineConfig) -> list[str]:
    return ["python3", "-m", "vllm.entrypoints.openai.api_server"] if cfg.engine == "vllm" else ["/app/llama-server"]


def _liveness_command(cfg: EngineConfig, deadline: Sized) -> list[str]:
    """A real one-token generation with a deadline, as a container probe command."""
    body = json.dumps({"model": cfg.name, "prompt": "ping", "max_tokens": 1, "temperature": 0})
    if cfg.engine == "llamacpp":  # the llama.cpp image has curl, not python
        return [
            "curl",
            "-sf",
            "-m",
            f"{deadline.int}",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            f"http://127.0.0.1:{ENGINE_PORT}/v1/completions",
        ]
    code = (
        "import json,os,sys,urllib.request as u;"
        f"h={{'Content-Type':'application/json'}};k=os.environ.get('{API_KEY_ENV['vllm']}');"
        "k and h.update(Authorization='Bearer '+k);"
        f"r=u.Request('http://127.0.0.1:{ENGINE_PORT}/v1/completions',data={body!r}.encode(),headers=h);"
        f"sys.exit(0 if json.load(u.urlopen(r,timeout={deadline.value:g})).get('choices') else 1)"
    )
    return ["python3", "-c", code]


def _header(inp: DeployInputs, what: str) -> str:
    lines = [f"# {what} written by `servetune deploy` (servetune.operate.deploy). Where each number came from:"]
    lines += [f"#   {k}: {v}" for k, v in inp.sources().items()]
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=200)


# ---- compose ----------------------------------------------------------------------------------------------------
def compose(inp: DeployInputs, dest: Path) -> list[Path]:
    cfg = _container_cfg(inp)
    literal, secret = _env(inp.cfg)
    env: dict[str, str] = {**literal, **{k: f"${{{k}:?set {k} in the environment or .env}}" for k in secret}}
    model_dir = cfg.model if cfg.engine != "llamacpp" else str(Path(cfg.model).parent)
    host_dir = inp.cfg.model if Path(inp.cfg.model).is_absolute() else f"./models/{Path(cfg.model).name}"
    if cfg.engine == "llamacpp":
        host_dir = str(Path(host_dir).parent) if host_dir.endswith(".gguf") else host_dir
    startup, deadline = inp.startup(), inp.liveness()
    engine: dict[str, Any] = {
        "image": inp.image,
        "entrypoint": _program(cfg),
        "command": engine_args(cfg, "0.0.0.0", ENGINE_PORT),
        "volumes": [f"${{MODEL_DIR:-{host_dir}}}:{model_dir}:ro"],
        "shm_size": SHM,
        "ports": [f"{PROXY_PORT}:80"],  # nginx runs in this service's network namespace
        "healthcheck": {
            "test": ["CMD", *_liveness_command(cfg, deadline)],
            "interval": f"{PROBE_PERIOD_S * 3}s",
            "timeout": f"{deadline.int}s",
            "retries": 2,
            "start_period": f"{startup.int}s",
        },
        "restart": "unless-stopped",
        "stop_grace_period": f"{DRAIN_S}s",
    }
    if env:
        engine["environment"] = env
    if inp.evidence.gpu or inp.gpus > 1:
        engine["deploy"] = {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": inp.gpus, "capabilities": ["gpu"]}]}
            }
        }
    doc = {
        "name": inp.name,
        "x-servetune-sources": inp.sources(),
        "services": {
            "engine": engine,
            "proxy": {
                "image": IMAGES["nginx"],
                "network_mode": "service:engine",
                "volumes": ["./nginx.conf:/etc/nginx/nginx.conf:ro"],
                "depends_on": {"engine": {"condition": "service_healthy"}},
                "restart": "unless-stopped",
                "stop_grace_period": f"{DRAIN_S + 5}s",
            },
            "prometheus": {
                "image": IMAGES["prometheus"],
                "volumes": [
                    "./prometheus.yml:/etc/prometheus/prometheus.yml:ro",
                    "./alerts.yml:/etc/prometheus/alerts.yml:ro",
                ],
                "ports": ["9090:9090"],
                "restart": "unless-stopped",
            },
            "grafana": {
                "image": IMAGES["grafana"],
                "volumes": [
                    "./grafana/provisioning:/etc/grafana/provisioning:ro",
                    "./grafana/dashboards:/var/lib/grafana/dashboards:ro",
                ],
                "ports": ["3000:3000"],
                "depends_on": ["prometheus"],
                "restart": "unless-stopped",
            },
        },
    }
    settings = inp.proxy_settings("80")
    ai = inp.alert_inputs(supervised=False)
    return [
        _write(dest / "compose.yaml", _header(inp, "docker compose file") + _dump(doc)),
        _write(
            dest / "nginx.conf",
            proxy.render(settings, {"main": f"127.0.0.1:{ENGINE_PORT}"}, sources=inp.sources()),
        ),
        _write(dest / "alerts.yml", alerts.rules_yaml(ai)),
        _write(
            dest / "prometheus.yml",
            alerts.scrape_config(inp.name, [f"engine:{ENGINE_PORT}"], [], ["alerts.yml"]),
        ),
        _write(
            dest / "grafana/provisioning/datasources/prometheus.yml",
            _dump(
                {
                    "apiVersion": 1,
                    "datasources": [
                        {"name": "Prometheus", "type": "prometheus", "url": "http://prometheus:9090", "isDefault": True}
                    ],
                }
            ),
        ),
        _write(
            dest / "grafana/provisioning/dashboards/servetune.yml",
            _dump(
                {
                    "apiVersion": 1,
                    "providers": [
                        {"name": "servetune", "type": "file", "options": {"path": "/var/lib/grafana/dashboards"}}
                    ],
                }
            ),
        ),
        _write(dest / "grafana/dashboards/servetune.json", json.dumps(alerts.dashboard(ai), indent=1) + "\n"),
    ]


# ---- kubernetes -------------------------------------------------------------------------------------------------
def kubernetes(inp: DeployInputs, dest: Path) -> list[Path]:
    cfg = _container_cfg(inp)
    literal, secret = _env(inp.cfg)
    labels = {"app.kubernetes.io/name": inp.name, "app.kubernetes.io/managed-by": "servetune"}
    startup, deadline = inp.startup(), inp.liveness()
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in literal.items()]
    env += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": f"{inp.name}-secrets", "key": k.lower().replace("_", "-")}}}
        for k in secret
    ]
    model_mount = cfg.model if cfg.engine != "llamacpp" else str(Path(cfg.model).parent)
    container: dict[str, Any] = {
        "name": "engine",
        "image": inp.image,
        "command": _program(cfg),
        "args": engine_args(cfg, "0.0.0.0", ENGINE_PORT),
        "ports": [{"name": "http", "containerPort": ENGINE_PORT}],
        "volumeMounts": [
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "model", "mountPath": model_mount, "readOnly": True},
        ],
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(startup.value / PROBE_PERIOD_S),
        },
        "readinessProbe": {
            "httpGet": {"path": "/v1/models", "port": "http"},
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "exec": {"command": _liveness_command(cfg, deadline)},
            "periodSeconds": PROBE_PERIOD_S * 3,
            "timeoutSeconds": deadline.int,
            "failureThreshold": 2,
        },
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
    }
    if env:
        container["env"] = env
    if inp.evidence.gpu or inp.gpus > 1:
        container["resources"] = {"limits": {"nvidia.com/gpu": inp.gpus}, "requests": {"nvidia.com/gpu": inp.gpus}}
    meta = {"name": inp.name, "labels": labels}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                **meta,
                "annotations": {f"servetune.dev/{k.replace(' ', '-')}": v for k, v in inp.sources().items()},
            },
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},  # a rolling update would need twice the GPUs
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": DRAIN_S + 10,
                        "containers": [container],
                        "volumes": [
                            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                            {"name": "model", "persistentVolumeClaim": {"claimName": f"{inp.name}-models"}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": labels, "ports": [{"name": "http", "port": ENGINE_PORT, "targetPort": "http"}]},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{inp.name}-prometheus", "labels": labels},
            "data": {
                "alerts.yml": alerts.rules_yaml(inp.alert_inputs(supervised=False)),
                "prometheus.yml": alerts.scrape_config(inp.name, [f"{inp.name}:{ENGINE_PORT}"], [], ["alerts.yml"]),
            },
        },
    ]
    head = _header(inp, "Kubernetes manifests") + (
        f"#   startupProbe: {math.ceil(startup.value / PROBE_PERIOD_S)} x {PROBE_PERIOD_S} s = {startup.int} s "
        "before the kubelet gives up (a guessed initialDelaySeconds kills the pod mid-load)\n"
        "#   PodDisruptionBudget minAvailable 1: a node drain waits for an operator instead of costing a cold start\n"
    )
    text = head + "\n---\n".join(_dump(d) for d in docs)
    return [_write(dest / f"{inp.name}.yaml", text)]


# ---- systemd ----------------------------------------------------------------------------------------------------
def systemd(inp: DeployInputs, dest: Path) -> list[Path]:
    cfg = _public_flags(inp.cfg)
    literal, secret = _env(inp.cfg)
    conf_dir, state_dir = f"/etc/servetune/{inp.name}", f"/var/lib/servetune/{inp.name}"
    engine_yaml = {**cfg.model_dump(mode="json", exclude_none=True), "env": literal}
    startup, deadline = inp.startup(), inp.liveness()
    settings = inp.proxy_settings("x")
    exec_start = [
        "/usr/local/bin/servetune",
        "serve",
        f"{conf_dir}/engine.yaml",
        *("--run-dir", f"{state_dir}/run", "--port", str(PROXY_PORT), "--control-port", str(CONTROL_PORT)),
        *("--startup-timeout", str(startup.int), "--liveness-deadline", f"{deadline.value:g}"),
        *("--read-timeout", str(settings.read_timeout.int), "--drain", str(DRAIN_S)),
    ]
    unit = [
        _header(inp, "systemd unit").rstrip("\n"),
        "[Unit]",
        f"Description=servetune serve {inp.name}: {cfg.engine} {cfg.name} behind nginx",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "User=servetune",
        f"WorkingDirectory={state_dir}",
        f"# Secrets ({', '.join(secret) or 'none needed'}) live in the EnvironmentFile (mode 0600), never here.",
        f"EnvironmentFile=-{conf_dir}/{inp.name}.env",
        f"ExecStart={shlex.join(exec_start)}",
        "# SIGTERM: servetune stops taking requests, drains streams, stops the engine and nginx itself.",
        "KillSignal=SIGTERM",
        "KillMode=mixed",
        f"TimeoutStopSec={DRAIN_S + 10 + 30}",
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    ai = inp.alert_inputs(supervised=True)
    return [
        _write(dest / f"servetune-{inp.name}.service", "\n".join(unit) + "\n"),
        _write(dest / "engine.yaml", _header(inp, "engine config") + _dump(engine_yaml)),
        _write(
            dest / f"{inp.name}.env.example",
            "# Copy to " + f"{conf_dir}/{inp.name}.env (chmod 600) and fill in:\n" + "".join(f"{k}=\n" for k in secret),
        ),
        _write(dest / "alerts.yml", alerts.rules_yaml(ai)),
        _write(
            dest / "prometheus.yml",
            alerts.scrape_config(inp.name, [f"127.0.0.1:{PROXY_PORT}"], [f"127.0.0.1:{CONTROL_PORT}"], ["alerts.yml"]),
        ),
        _write(dest / "grafana-dashboard.json", json.dumps(alerts.dashboard(ai), indent=1) + "\n"),
    ]


def write_deployment(inp: DeployInputs, dest: Path, targets: tuple[str, ...]) -> list[Path]:
    """Writes the chosen targets into dest/<target>/; returns the files written."""
    writers = {"compose": compose, "kubernetes": kubernetes, "systemd": systemd}
    try:
        return [p for t in targets for p in writers[t](inp, dest / t)]
    except OSError as err:
        raise ServetuneError(
            f"cannot write the deployment files into {dest}: {err.strerror}", "pass a writable --out"
        ) from err
