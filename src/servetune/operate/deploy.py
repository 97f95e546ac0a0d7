"""`servetune deploy`: docker compose, Kubernetes and systemd files for a config, sized from measurements.

Inputs come from a tuning folder (its winner and what was measured of it), an engine config file, or a plan
(`servetune plan --json`, the seed systems in examples/plans): then the numbers are the planner's, and say so.
Every file states where each number came from.

What a container runs is asked of the one builder of command lines (`servetune.engines.commands.container_launch`:
the engine's own image entrypoint, pinned image, model argument), so compose and Kubernetes run the engine itself
(llama.cpp: its server and the GGUF file; SGLang: its image and module). Secrets are never written: a secret flag
or environment variable becomes a reference to an environment variable — `${VAR}` in compose (from the
environment or `.env`), a Secret's key (`secretKeyRef`, `$(VAR)` in the arguments) in Kubernetes, the unit's
EnvironmentFile for systemd. No input can add a line or a key: YAML is written by a YAML dumper, every literal `$`
is escaped for compose and Kubernetes, systemd values are quoted per systemd.syntax, and text from a tuning
folder that ends up in a comment is kept on one line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from servetune.engines.adapter import Image
from servetune.engines.commands import CONTAINER_PORT, EnvRef, Launch, Word, container_launch
from servetune.engines.config import SECRET_ENV, EngineConfig, secret_env
from servetune.engines.models import resolve_model
from servetune.engines.registry import adapter_for
from servetune.errors import ServetuneError
from servetune.hardware.gpus import parse_gpu_arg
from servetune.operate import alerts, proxy
from servetune.operate.deploy_args import MAX_COLD_START_S, MAX_GPUS, DeployArgs
from servetune.operate.evidence import Evidence
from servetune.operate.sizing import (
    PROBE_PERIOD_S,
    Sized,
    body_bytes,
    liveness_deadline,
    read_timeout,
    startup_budget,
)
from servetune.operate.source import load_source
from servetune.secrets import is_secret_flag, is_secret_name, secret_texts

ENGINES = ("vllm", "llamacpp", "sglang")
"""The engines deploy writes files for (each has an official server image)."""
ENGINE_PORT = CONTAINER_PORT
PROXY_PORT = 8000
CONTROL_PORT = 9400
DRAIN_S = 30
SHM = "16g"
"""/dev/shm for vLLM's worker processes (tensor parallel shares tensors through it; Docker's 64 MiB is too small)."""
IMAGES = {"prometheus": "prom/prometheus:v2.53.0", "grafana": "grafana/grafana:11.1.0", "nginx": "nginx:1.27"}
DEFAULT_COLD_START = Sized(value=300, source="no cold start measured: servetune's default (measure one with tune)")
NAME = re.compile(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?")
"""A deployment name: a DNS label (Kubernetes object names), also a safe unit and folder name."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
UNIT_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
"""A systemd command-line word that needs no quoting."""


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
    image: Image
    given_model: str
    """The model as the source names it: a path on the target host, or `tiny` (servetune resolves it where it
    runs); `cfg.model` is the file it resolves to here, which names the file inside a container."""

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
        if not NAME.fullmatch(name):
            raise ServetuneError(
                f"bad deployment name {name!r}",
                "use at most 40 lowercase letters, digits and '-', starting with a letter, e.g. --name qwen-chat",
            )
        if path.suffix == ".json" and path.is_file() and "serve_flags" in path.read_text(errors="replace")[:200_000]:
            src_cfg, evidence, planned = _from_plan(path)
        else:
            src = load_source(path, resolve=False)
            src_cfg, evidence, planned = src.cfg, src.evidence, {}
        cfg = _deployable(resolve_model(src_cfg), str(path))
        evidence = _one_line_data(evidence)
        if cold_start_s is not None:
            cold = Sized(value=_cold_start(cold_start_s), source=_given_text(cold_start_source, "--cold-start-source"))
        else:
            cold = evidence.cold_start() or DEFAULT_COLD_START
        mml = evidence.max_model_len or _flag_len(cfg) or Sized(value=4096, source="no max_model_len known")
        longest = evidence.longest_request or planned.get("longest") or Sized(value=150, source="nothing measured")
        version = cfg.version or planned.get("version")
        gpu_name, count = _gpus(gpu, gpus, evidence)
        return cls(
            name=name,
            cfg=cfg.model_copy(update={"version": version}),
            evidence=evidence.model_copy(update={"gpu": gpu_name, "slos": {**evidence.slos, **(slos or {})}}),
            gpus=count,
            cold_start=cold,
            longest_request=longest,
            max_model_len=mml,
            max_concurrency=evidence.max_concurrency or planned.get("concurrency"),
            image=adapter_for(cfg.engine).image(version, count if gpu_name or count > 1 else 0),
            given_model=src_cfg.model,
        )

    @property
    def on_gpus(self) -> bool:
        """Whether the files reserve GPUs (a GPU type is known, or more than one is asked for)."""
        return bool(self.evidence.gpu) or self.gpus > 1

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
            "image": f"{self.image.ref} = {self.image.source}",
            "startup budget": f"{self.startup().int} s = {self.startup().source}",
            "liveness deadline": f"{self.liveness().value:g} s = {self.liveness().source}",
            "read timeout": f"{s.read_timeout.int} s = {s.read_timeout.source}",
            "body size": f"{s.body_bytes.int} bytes = {s.body_bytes.source}",
        }


def _deployable(cfg: EngineConfig, where: str) -> EngineConfig:
    """The config, refused when deploy cannot run its engine or its environment has a name no file can carry (its
    flags are canonical, as every config's: an alias such as llama.cpp's `-hft` is known for the secret it is)."""
    if cfg.engine not in ENGINES:
        raise ServetuneError(
            f"{where}: deploy writes files for {', '.join(ENGINES)}, not {cfg.engine}",
            "deploy the vLLM config a simulated one imitates (engine: vllm, its flags without the simulator's)"
            if cfg.engine == "sim"
            else f"give a config of one of: {', '.join(ENGINES)}",
        )
    for key in cfg.env:
        if not ENV_NAME.fullmatch(key):
            raise ServetuneError(
                f"{where}: environment variable name {key!r} is not a shell name",
                "use letters, digits and '_', not starting with a digit (e.g. VLLM_LOGGING_LEVEL)",
            )
    if cfg.engine == "llamacpp" and not cfg.model.endswith(".gguf"):
        raise ServetuneError(
            f"{where}: llama.cpp serves a GGUF file, and the model {cfg.model!r} is not one",
            "point model: at the .gguf file (or use `tiny`, servetune's tiny model)",
        )
    return cfg


def _gpus(gpu: str | None, gpus: int | None, evidence: Evidence) -> tuple[str | None, int]:
    """The GPU type and the GPUs per replica: `--gpu NAME[xN]` read by the one reader of GPU arguments (an unknown
    name is an error with the catalog's suggestion, its count is used), `--gpus N`, else what the source says."""
    name, count = evidence.gpu, gpus if gpus is not None else evidence.gpu_count
    if gpu is not None:
        choice = parse_gpu_arg(gpu)
        if choice.counted and gpus is not None and gpus != choice.count:
            raise ServetuneError(
                f"--gpu {gpu} says {choice.count} GPU(s) per replica and --gpus says {gpus}",
                "give the count once: --gpu NAMExN, or --gpu NAME --gpus N",
            )
        name, count = choice.gpu.name, choice.count if choice.counted else count
    if not 1 <= count <= MAX_GPUS:
        raise ServetuneError(
            f"{count} GPUs per replica: deploy writes files for 1 to {MAX_GPUS} GPUs on one host",
            "give the GPUs one replica runs on, e.g. --gpus 2 or --gpu H200x2",
        )
    return name, count


def _cold_start(value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_COLD_START_S):
        raise ServetuneError(
            f"--cold-start-s must be a number of seconds above 0 and at most {MAX_COLD_START_S:.0f} (a day), "
            f"got {value:g}",
            "give the measured cold start in seconds, e.g. --cold-start-s 251",
        )
    return value


def _given_text(text: str | None, option: str) -> str:
    """A text the user typed that a file repeats in a comment: one printable line, or refused."""
    if text is None:
        return "--cold-start-s"
    if not text.isprintable() or len(text) > 500:
        raise ServetuneError(
            f"{option} must be one line of printable text (at most 500 characters), got {text[:60]!r}",
            f"write where the number came from on one line, e.g. {option} 'measured on the H200, 2026-11-30'",
        )
    return text


def _one_line(text: str) -> str:
    """`text` with every line break and control character written as its escape (`\\n`), so it stays one line of
    a comment in any file (YAML, nginx, systemd also break lines at U+0085, U+2028, U+2029)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


def _one_line_data(evidence: Evidence) -> Evidence:
    """Evidence from a tuning folder with every text on one line (a variant name may hold a newline)."""

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _one_line(value)
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return Evidence.model_validate(walk(evidence.model_dump()))


def _flag_len(cfg: EngineConfig) -> Sized | None:
    for key in ("max-model-len", "ctx-size", "context-length"):
        value = cfg.flags.get(key)
        if isinstance(value, int) and value > 0:
            return Sized(value=value, source=f"the config's --{key}")
    return None


def _from_plan(path: Path) -> tuple[EngineConfig, Evidence, dict[str, Any]]:
    """A `servetune plan --json` file: the planned config and the planner's numbers (estimates, said so)."""
    where = f"planner estimate in {path.name} (not measured)"
    try:
        plan = json.loads(path.read_text())
        flags = dict(plan["serve_flags"])
        speeds = {s["name"]: s for s in plan.get("speeds", [])}
        max_len = int(plan["max_model_len"])
        model = str(plan["model"])
        concurrency = float(plan["max_concurrency"])
        gpu_count = int(plan.get("num_gpus") or 1)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ServetuneError(
            f"{path} is not a `servetune plan --json` file: {type(err).__name__}: {err}",
            "write one with `servetune plan MODEL --gpu GPU --json > plan.json`",
        ) from err
    if not (max_len > 0 and math.isfinite(concurrency) and concurrency >= 0 and gpu_count >= 1):
        raise ServetuneError(
            f"{path}: max_model_len {max_len}, max_concurrency {concurrency:g}, num_gpus {gpu_count} are not a plan's",
            "write the plan again with `servetune plan … --json`",
        )
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
    planned["concurrency"] = Sized(value=round(concurrency, 2), source=f"{where}: KV cache capacity")
    name = PurePosixPath(model).name or "model"
    cfg = EngineConfig(engine="vllm", model=f"/models/{name}", served_model_name=model, flags=flags)
    evidence = Evidence(
        origin=f"plan {path.name}",
        max_model_len=Sized(value=max_len, source=f"{where}"),
        gpu=str(plan.get("gpu")),
        gpu_count=gpu_count,
    )
    return cfg, evidence, planned


# ---- helpers shared by the targets ------------------------------------------------------------------------------
def _model_mount(inp: DeployInputs) -> tuple[str, str, str]:
    """(host path, in-container mount point, the model argument inside): llama.cpp's GGUF file has its folder
    mounted at /models and is named in it; a model folder is mounted at /models/NAME. The host path is the
    source's own when it gives an absolute one, else ./models (next to the compose file)."""
    path, given = PurePosixPath(inp.cfg.model), PurePosixPath(inp.given_model)
    if inp.cfg.engine == "llamacpp":
        return (str(given.parent) if given.is_absolute() else "./models"), "/models", f"/models/{path.name}"
    inside = f"/models/{path.name or 'model'}"
    return (str(given) if given.is_absolute() else f"./models/{path.name}"), inside, inside


def _launch(inp: DeployInputs) -> Launch:
    return container_launch(inp.cfg, model=_model_mount(inp)[2], port=ENGINE_PORT)


def _literal_env(cfg: EngineConfig) -> dict[str, str]:
    return {k: v for k, v in cfg.env.items() if not is_secret_name(k)}


def _key_var(cfg: EngineConfig) -> str | None:
    """The variable the liveness probe reads the engine's API key from (None: the config sets no key)."""
    return secret_env(cfg.engine, "api-key") if cfg.flags.get("api-key") else None


def _liveness_command(cfg: EngineConfig, deadline: Sized) -> list[str]:
    """A real one-token generation with a deadline, as a container probe command (the request body its last
    argument; the key, when the engine demands one, read from the container's environment)."""
    body = json.dumps({"model": cfg.name, "prompt": "ping", "max_tokens": 1, "temperature": 0})
    url = f"http://127.0.0.1:{ENGINE_PORT}/v1/completions"
    var = _key_var(cfg)
    if cfg.engine == "llamacpp":  # the llama.cpp image has curl, not python
        auth = f'-H "Authorization: Bearer ${var}" ' if var else ""
        script = f"curl -sf -m {deadline.int} -H 'Content-Type: application/json' {auth}-d \"$0\" {url}"
        return ["sh", "-c", script, body]
    key = f"h['Authorization']='Bearer '+os.environ[{var!r}];" if var else ""
    code = (
        "import json,os,sys,urllib.request as u;"
        f"h={{'Content-Type':'application/json'}};{key}"
        f"r=u.Request({url!r},data=sys.argv[1].encode(),headers=h);"
        f"sys.exit(0 if json.load(u.urlopen(r,timeout={deadline.value:g})).get('choices') else 1)"
    )
    return ["python3", "-c", code, body]


def _header(inp: DeployInputs, what: str, extra: Sequence[str] = ()) -> str:
    lines = [f"# {what} written by `servetune deploy` (servetune.operate.deploy). Where each number came from:"]
    lines += [f"#   {_one_line(k)}: {_one_line(v)}" for k, v in inp.sources().items()]
    lines += [f"#   {_one_line(e)}" for e in extra]
    return "\n".join(lines) + "\n"


File = tuple[Path, str]
"""A deployment file built in memory: where it goes, and its text."""


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper without anchors and aliases (`&id001`): each value is written where it is used."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=200)


# ---- compose ----------------------------------------------------------------------------------------------------
def _compose_value(value: Any) -> Any:
    """A compose value with every literal `$` escaped (`$$`: compose interpolates all of them) and every secret
    reference written `${VAR:?…}` (compose stops with that message when the variable is unset)."""
    if isinstance(value, EnvRef):
        return f"{value.prefix.replace('$', '$$')}${{{value.name}:?set {value.name} in the environment or .env}}"
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: _compose_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_compose_value(v) for v in value]
    return value


def compose(inp: DeployInputs, dest: Path) -> list[File]:
    launch = _launch(inp)
    host_dir, mount, _ = _model_mount(inp)
    env: dict[str, Word] = {**dict(launch.env), **{k: EnvRef(k) for k in launch.secrets}}
    startup, deadline = inp.startup(), inp.liveness()
    engine: dict[str, Any] = {
        "image": inp.image.ref,
        "entrypoint": list(launch.program),
        "command": list(launch.args),
        "shm_size": SHM,
        "ports": [f"{PROXY_PORT}:80"],  # nginx runs in this service's network namespace
        "healthcheck": {
            "test": ["CMD", *_liveness_command(inp.cfg, deadline)],
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
    if inp.on_gpus:
        engine["deploy"] = {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": inp.gpus, "capabilities": ["gpu"]}]}
            }
        }
    doc = _compose_value(
        {
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
    )
    # The model folder on the host: `MODEL_DIR` overrides the default (a literal `$` in the path stays escaped).
    source = f"${{MODEL_DIR:-{host_dir.replace('$', '$$')}}}"
    doc["services"]["engine"]["volumes"] = [{"type": "bind", "source": source, "target": mount, "read_only": True}]
    settings = inp.proxy_settings("80")
    ai = inp.alert_inputs(supervised=False)
    secrets = [*launch.secrets, "MODEL_DIR (optional: the model folder on the host)"]
    return [
        (
            dest / "compose.yaml",
            _header(inp, "docker compose file", [f"from the environment or .env: {', '.join(secrets)}"]) + _dump(doc),
        ),
        (
            dest / "nginx.conf",
            proxy.render(settings, {"main": f"127.0.0.1:{ENGINE_PORT}"}, sources=inp.sources()),
        ),
        (dest / "alerts.yml", alerts.rules_yaml(ai)),
        (
            dest / "prometheus.yml",
            alerts.scrape_config(inp.name, [f"engine:{ENGINE_PORT}"], [], ["alerts.yml"]),
        ),
        (
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
        (
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
        (dest / "grafana/dashboards/servetune.json", json.dumps(alerts.dashboard(ai), indent=1) + "\n"),
    ]


# ---- kubernetes -------------------------------------------------------------------------------------------------
def _k8s_word(word: Word) -> str:
    """A container command word: a literal `$(` escaped (`$$(`: the kubelet expands `$(VAR)`), a secret reference
    as `$(VAR)`, which the kubelet fills from the container's environment (a Secret's key)."""
    if isinstance(word, EnvRef):
        return f"{word.prefix.replace('$(', '$$(')}$({word.name})"
    return word.replace("$(", "$$(")


def kubernetes(inp: DeployInputs, dest: Path) -> list[File]:
    launch = _launch(inp)
    labels = {"app.kubernetes.io/name": inp.name, "app.kubernetes.io/managed-by": "servetune"}
    startup, deadline = inp.startup(), inp.liveness()
    secret_name = f"{inp.name}-secrets"
    env: list[dict[str, Any]] = [{"name": k, "value": _k8s_word(v)} for k, v in launch.env if not isinstance(v, EnvRef)]
    env += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": k.lower().replace("_", "-")}}}
        for k in launch.secrets
    ]
    _, mount, _ = _model_mount(inp)
    container: dict[str, Any] = {
        "name": "engine",
        "image": inp.image.ref,
        "command": [_k8s_word(w) for w in launch.program],
        "args": [_k8s_word(w) for w in launch.args],
        "ports": [{"name": "http", "containerPort": ENGINE_PORT}],
        "volumeMounts": [
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "model", "mountPath": mount, "readOnly": True},
        ],
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(startup.value / PROBE_PERIOD_S),
        },
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "exec": {"command": _liveness_command(inp.cfg, deadline)},
            "periodSeconds": PROBE_PERIOD_S * 3,
            "timeoutSeconds": deadline.int,
            "failureThreshold": 2,
        },
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
    }
    if env:
        container["env"] = env
    if inp.on_gpus:
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
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
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
    notes = [
        f"startupProbe: {math.ceil(startup.value / PROBE_PERIOD_S)} x {PROBE_PERIOD_S} s = {startup.int} s before the "
        "kubelet gives up (a guessed initialDelaySeconds kills the pod mid-load)",
        "PodDisruptionBudget maxUnavailable 1: a node drain may evict one pod at a time (with one replica the drain "
        "proceeds and costs one cold start; a budget that requires the only pod would block every drain)",
        f"PersistentVolumeClaim {inp.name}-models holds the model (mounted read-only at {mount})",
    ]
    if launch.secrets:
        keys = ", ".join(f"{k.lower().replace('_', '-')}" for k in launch.secrets)
        notes.append(f"Secret {secret_name} (create it first) holds the keys {keys}")
    text = _header(inp, "Kubernetes manifests", notes) + "\n---\n".join(_dump(d) for d in docs)
    return [(dest / f"{inp.name}.yaml", text)]


# ---- systemd ----------------------------------------------------------------------------------------------------
def _unit_word(word: str) -> str:
    """One word of a systemd command line, quoted per systemd.syntax: `$` and `%` doubled (no variable or
    specifier expansion), a word with other characters in double quotes with `\\` and `"` escaped."""
    if not word.isprintable():
        raise ServetuneError(
            f"a systemd command-line word holds a line break or control character: {word[:60]!r}",
            "remove it from the config (model path, served name or flag value)",
        )
    escaped = word.replace("$", "$$").replace("%", "%%")
    if UNIT_WORD.fullmatch(word):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unit_comment(text: str) -> str:
    """A comment line of a unit: one line, and never ending in `\\` (systemd would join the next line to it)."""
    line = _one_line(text)
    return f"# {line}." if line.endswith("\\") else f"# {line}"


def _systemd_secrets(cfg: EngineConfig) -> tuple[EngineConfig, list[str]]:
    """The config without its secret flags, and the variables the EnvironmentFile must set: the engine reads
    each secret flag's value from its own variable (`SECRET_ENV`); a secret flag it has none for cannot be
    given to it without writing the value, so it is refused."""
    own = SECRET_ENV.get(cfg.engine, {})
    secret_flags = [k for k, v in cfg.flags.items() if is_secret_flag(k) and secret_texts(v)]
    cannot = [k for k in secret_flags if k not in own]
    if cannot:
        raise ServetuneError(
            f"the systemd target cannot pass {', '.join('--' + k for k in cannot)} to {cfg.engine} without writing "
            "its value (the engine reads it from no environment variable)",
            "deploy with --target compose or kubernetes (they take it from the environment or a Secret), or drop "
            "the flag from the config",
        )
    variables = [own[k] for k in secret_flags] + sorted(k for k in cfg.env if is_secret_name(k))
    flags = {k: v for k, v in cfg.flags.items() if k not in secret_flags}
    env = _literal_env(cfg)
    return cfg.model_copy(update={"flags": flags, "env": env}), list(dict.fromkeys(variables))


def systemd(inp: DeployInputs, dest: Path) -> list[File]:
    cfg, secret = _systemd_secrets(inp.cfg.model_copy(update={"model": inp.given_model}))
    conf_dir, state_dir = f"/etc/servetune/{inp.name}", f"/var/lib/servetune/{inp.name}"
    engine_yaml = cfg.model_dump(mode="json", exclude_none=True)
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
    head = [_unit_comment(line[2:]) for line in _header(inp, "systemd unit").splitlines()]
    unit = [
        *head,
        "[Unit]",
        f"Description=servetune serve {inp.name} ({cfg.engine}, behind nginx)",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "User=servetune",
        f"WorkingDirectory={state_dir}",
        _unit_comment(
            f"Secrets ({', '.join(secret) or 'none needed'}) live in the EnvironmentFile (mode 0600), never here."
        ),
        f"EnvironmentFile=-{conf_dir}/{inp.name}.env",
        f"ExecStart={' '.join(_unit_word(w) for w in exec_start)}",
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
        (dest / f"servetune-{inp.name}.service", "\n".join(unit) + "\n"),
        (dest / "engine.yaml", _header(inp, "engine config") + _dump(engine_yaml)),
        (
            dest / f"{inp.name}.env.example",
            "# Copy to " + f"{conf_dir}/{inp.name}.env (chmod 600) and fill in:\n" + "".join(f"{k}=\n" for k in secret),
        ),
        (dest / "alerts.yml", alerts.rules_yaml(ai)),
        (
            dest / "prometheus.yml",
            alerts.scrape_config(inp.name, [f"127.0.0.1:{PROXY_PORT}"], [f"127.0.0.1:{CONTROL_PORT}"], ["alerts.yml"]),
        ),
        (dest / "grafana-dashboard.json", json.dumps(alerts.dashboard(ai), indent=1) + "\n"),
    ]


def deploy(args: DeployArgs) -> list[Path]:
    """`servetune deploy`: the files `args` ask for, sized from SOURCE's measurements; returns the files written."""
    inputs = DeployInputs.from_path(
        args.source,
        name=args.name,
        gpu=args.gpu,
        gpus=args.gpus,
        cold_start_s=args.cold_start_s,
        cold_start_source=args.cold_start_source,
        slos=args.slos(),
    )
    return write_deployment(inputs, args.dest(), args.target)


def write_deployment(inp: DeployInputs, dest: Path, targets: tuple[str, ...]) -> list[Path]:
    """Writes the chosen targets into dest/<target>/; returns the files written. Every target's files are built in
    memory first: a target that refuses the config (systemd and a secret flag the engine reads from no variable)
    stops the command before any file of any target is written, so no half deployment is left to be mistaken for
    a whole one."""
    builders = {"compose": compose, "kubernetes": kubernetes, "systemd": systemd}
    files = [f for t in targets for f in builders[t](inp, dest / t)]
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)
    except OSError as err:
        raise ServetuneError(
            f"cannot write the deployment files into {dest}: {err.strerror}", "pass a writable --out"
        ) from err
    return [path for path, _ in files]
